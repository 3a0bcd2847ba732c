package testservers

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// startMinIO runs `minio server DIR` (single drive) with the web console off. Its root user
// and versitygw's root account are s3test's credentials, so s3test.Env serves both (MinIO
// wants a secret of at least 8 characters).
func startMinIO(s *Server) error {
	_, err := s.run(2, []string{
		"MINIO_ROOT_USER=" + s3test.AccessKeyID,
		"MINIO_ROOT_PASSWORD=" + s3test.SecretAccessKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CONFIG_ENV_FILE=", // never read a config file of the machine
	}, func(ports []int, data string) []string {
		return []string{"server", data, "--address", proc.Addr(ports[0]), "--console-address", proc.Addr(ports[1]), "--quiet"}
	})
	if err != nil {
		return err
	}
	// MinIO's readiness probe answers 200 once the drive is formatted and the S3 API serves.
	if err := testbin.WaitHTTP(s.p, s.Endpoint+"/minio/health/ready", 2*time.Minute); err != nil {
		return err
	}
	return s3Ready(s)
}

// startVersityGW runs versitygw's posix backend over DIR: a bucket is a directory.
func startVersityGW(s *Server) error {
	addr, err := s.run(1, nil, func(ports []int, data string) []string {
		return []string{"--port", proc.Addr(ports[0]), "--access", s3test.AccessKeyID, "--secret", s3test.SecretAccessKey, "--region", s3test.Region, "posix", data}
	})
	if err != nil {
		return err
	}
	if err := testbin.WaitTCP(s.p, addr, time.Minute); err != nil {
		return err
	}
	return s3Ready(s)
}

// s3Ready finishes an S3 server's start: environment, bucket creation, readiness through
// the S3 API itself (ListBuckets signed with the test credentials).
func s3Ready(s *Server) error {
	for k, v := range s3test.Env() {
		s.Env = append(s.Env, k+"="+v)
	}
	client := s3.New(s3.Options{
		Region:       s3test.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, ""),
	})
	if err := s.p.WaitFor(context.Background(), time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	}); err != nil {
		return err
	}
	s.newBucket = func(ctx context.Context, name string) (string, error) {
		if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			return "", err
		}
		return s3test.BucketURL(s.Endpoint, name), nil
	}
	return nil
}
