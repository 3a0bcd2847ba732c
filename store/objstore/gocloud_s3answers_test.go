package objstore

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

// The S3 bucket reopened on a bounded client keeps what the storage URL set: the options of
// the client gocloud's URL opener built, and the encryption its bucket asks a write or copy for.
func TestBoundS3AnswersKeepsTheURLsSettings(t *testing.T) {
	ctx := context.Background()
	raw := "s3://b?region=eu-west-3&endpoint=http://127.0.0.1:9&use_path_style=true&disable_https=true" +
		"&accelerate=true&dualstack=true&ssetype=aes256&kmskeyid=k1" +
		"&request_checksum_calculation=when_required&response_checksum_validation=when_required"
	u, err := url.Parse(raw)
	require.NoError(t, err)
	plain, err := blob.OpenBucket(ctx, raw)
	require.NoError(t, err)
	defer plain.Close()
	g, err := openGocloudBackend(ctx, raw, u)
	require.NoError(t, err)
	defer g.close()

	var want, got *s3.Client
	require.True(t, plain.As(&want))
	require.True(t, g.bkt.As(&got))
	require.IsType(t, boundedAnswers{}, got.Options().HTTPClient)
	settings := func(c *s3.Client) []any {
		o := c.Options()
		endpoint, err := o.EndpointResolver.ResolveEndpoint(o.Region, o.EndpointOptions)
		require.NoError(t, err)
		return []any{o.Region, endpoint.URL, o.UsePathStyle, o.UseAccelerate,
			o.EndpointOptions.DisableHTTPS, o.EndpointOptions.UseDualStackEndpoint,
			o.RequestChecksumCalculation, o.ResponseChecksumValidation, o.RetryMaxAttempts, o.RetryMode}
	}
	require.Equal(t, settings(want), settings(got))
	require.Equal(t, []any{"eu-west-3", "http://127.0.0.1:9", true, true, true, aws.DualStackEndpointStateEnabled,
		aws.RequestChecksumCalculationWhenRequired, aws.ResponseChecksumValidationWhenRequired},
		settings(got)[:8], "the URL's own values")

	encryption := func(bkt *blob.Bucket) []any {
		var in *s3.CopyObjectInput
		stop := errors.New("stop before the request")
		err := bkt.Copy(ctx, "dst", "src", &blob.CopyOptions{BeforeCopy: func(as func(any) bool) error {
			require.True(t, as(&in))
			return stop
		}})
		require.ErrorIs(t, err, stop)
		return []any{in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId)}
	}
	require.Equal(t, []any{types.ServerSideEncryptionAes256, "k1"}, encryption(plain))
	require.Equal(t, encryption(plain), encryption(g.bkt))
}
