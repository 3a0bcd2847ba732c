package objstore_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/bucketconformance"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The bucket conformance suite (internal/testkit/bucketconformance) on every backend this package's
// tests can reach without outside servers: file:// with and without fsync, mem://, and s3://
// on the in-process S3 server in both of its storage engines. This file is an external test
// package because the suite imports objstore.

var memSeq atomic.Int64

func open(t *testing.T, u string) *objstore.Bucket {
	t.Helper()
	b, err := objstore.OpenBucket(context.Background(), u)
	require.NoError(t, err, "OpenBucket(%q)", u)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// tmpfsDir returns a fresh directory on tmpfs (/dev/shm) when there is one, else
// t.TempDir(): creating and fsyncing a file on this kind of shared disk costs milliseconds,
// and the suite writes thousands. The code paths (fsync included) are the same; the disk
// itself is covered by file-nosync and the cross-process race.
func tmpfsDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "walkeeper-blobtest-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func localOpeners() map[string]bucketconformance.Opener {
	return map[string]bucketconformance.Opener{
		// A root that does not exist yet: OpenBucket must create it.
		"file": func(t *testing.T) *objstore.Bucket {
			return open(t, fileURL(filepath.Join(tmpfsDir(t), "root", "nested")))
		},
		"file-nosync": func(t *testing.T) *objstore.Bucket { return open(t, fileURL(t.TempDir())+"?nosync=1") },
		"mem": func(t *testing.T) *objstore.Bucket {
			return open(t, fmt.Sprintf("mem://conformance-%d", memSeq.Add(1)))
		},
	}
}

// s3Openers opens a fresh bucket per call on each of s3test.StartEngines' servers (s3mem,
// the tests' default, and s3bolt, its on-disk engine). With WALKEEPER_S3_TEST_URL set (docs/STORAGE.md), only
// that endpoint, under a fresh random prefix= per call.
func s3Openers(t *testing.T) map[string]bucketconformance.Opener {
	t.Helper()
	if ext := os.Getenv(s3ExternalEnv); ext != "" {
		return map[string]bucketconformance.Opener{"external": func(t *testing.T) *objstore.Bucket {
			return open(t, withRandomPrefix(ext))
		}}
	}
	out := map[string]bucketconformance.Opener{}
	for name, srv := range s3test.StartEngines(t) {
		out[name] = func(t *testing.T) *objstore.Bucket {
			bucket := s3test.NewBucketName()
			require.NoError(t, srv.CreateBucket(bucket))
			return open(t, srv.BucketURL(bucket))
		}
	}
	return out
}

// s3ExternalEnv names an S3 endpoint of your own to test instead of the in-process server
// (docs/STORAGE.md), without a prefix= parameter: every test adds its own random one.
const s3ExternalEnv = "WALKEEPER_S3_TEST_URL"

func withRandomPrefix(u string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "prefix=" + s3test.NewBucketName() + "/"
}

func runAll(t *testing.T, openers map[string]bucketconformance.Opener, run func(*testing.T, bucketconformance.Opener)) {
	for _, name := range []string{"file", "file-nosync", "mem", "mem-sorted", "s3mem", "s3bolt", "external"} {
		if o, ok := openers[name]; ok {
			t.Run(name, func(t *testing.T) { run(t, o) })
		}
	}
}

// TestBucketConformance: the Bucket contract on file://, file:// with nosync and mem://.
func TestBucketConformance(t *testing.T) {
	runAll(t, localOpeners(), bucketconformance.Run)
}

// TestS3BucketConformance: the same contract on s3://, over HTTP through gocloud's s3blob and
// the AWS SDK, the stack a worker uses against AWS S3.
func TestS3BucketConformance(t *testing.T) {
	runAll(t, s3Openers(t), bucketconformance.Run)
}

const raceGoroutines = 8

// TestPutIfAbsentRaceGoroutines: 8 goroutines on one handle, 1000 keys, every key hit by all
// at the same moment.
func TestPutIfAbsentRaceGoroutines(t *testing.T) {
	runAll(t, localOpeners(), func(t *testing.T, o bucketconformance.Opener) {
		if strings.Contains(t.Name(), "nosync") {
			t.Skip("same code path as file")
		}
		bucketconformance.RaceGoroutines(t, o(t), raceGoroutines, 1000, 0)
	})
}

// TestS3PutIfAbsentRaceGoroutines: 8 goroutines, 200 keys, on each S3 engine.
func TestS3PutIfAbsentRaceGoroutines(t *testing.T) {
	runAll(t, s3Openers(t), func(t *testing.T, o bucketconformance.Opener) {
		bucketconformance.RaceGoroutines(t, o(t), raceGoroutines, 200, 0)
	})
}

// TestBucketRaceChild is the child side of the cross-process races below, run by
// re-executing the test binary; it skips in a normal run.
func TestBucketRaceChild(t *testing.T) { bucketconformance.RaceChild(t) }

// TestPutIfAbsentRaceProcesses: 8 OS processes race 200 keys on one file:// root on the
// real disk, released together per key, so every key is contended by every process. This is
// the case gocloud's fileblob gets wrong (its IfNotExist is stat-then-rename), and the one
// that matters: several workers on one machine share a dir. A round costs a pipe round trip
// to every child and an fsync, hence fewer keys than the goroutine race.
func TestPutIfAbsentRaceProcesses(t *testing.T) {
	root := t.TempDir()
	bucketconformance.RaceProcesses(t, fileURL(root), bucketconformance.RaceOptions{
		Procs: 8, Rounds: 200, ChildTest: "TestBucketRaceChild",
	})
	// ".tmp-" is the file backend's reserved temp prefix (objstore.Bucket's key rules).
	var left []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			left = append(left, p)
		}
		return nil
	})
	require.Empty(t, left, "temp files left")
}

// TestS3PutIfAbsentRaceProcesses: 8 OS processes, each with its own HTTP client, connection
// pool and SDK state as separate workers have, race 200 keys on one S3 server, released
// together per key, so every key is contended by every process.
func TestS3PutIfAbsentRaceProcesses(t *testing.T) {
	url := s3test.Start // credentials reach the children through the environment
	if ext := os.Getenv(s3ExternalEnv); ext != "" {
		url = func(testing.TB) string { return withRandomPrefix(ext) }
	}
	bucketconformance.RaceProcesses(t, url(t), bucketconformance.RaceOptions{
		Procs: 8, Rounds: 200, ChildTest: "TestBucketRaceChild",
	})
}
