package objstore

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
)

// Helpers for this package's tests that need a bucket, and the tests of what is not the
// shared contract: URL opening and the mem:// registry. The contract itself, on every
// backend, is conformance_test.go (internal/testkit/bucketconformance).

var memSeq atomic.Int64

// fileURL turns a local directory into a file:// URL, escaping whatever needs it.
func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// newMemURL returns a mem:// URL no other test uses (mem buckets live for the process).
func newMemURL() string { return fmt.Sprintf("mem://blobtest-%d", memSeq.Add(1)) }

type testBackend struct {
	name string
	// open returns a fresh, empty bucket and, for file://, its root directory.
	open func(t *testing.T) (*Bucket, string)
}

func testBackends() []testBackend {
	return []testBackend{
		{"file", func(t *testing.T) (*Bucket, string) {
			// A root that does not exist yet: OpenBucket must create it.
			root := filepath.Join(t.TempDir(), "root", "nested")
			return mustOpen(t, fileURL(root)), root
		}},
		{"file-nosync", func(t *testing.T) (*Bucket, string) {
			root := t.TempDir()
			return mustOpen(t, fileURL(root)+"?nosync=1"), root
		}},
		{"mem", func(t *testing.T) (*Bucket, string) {
			return mustOpen(t, newMemURL()), ""
		}},
	}
}

func mustOpen(t *testing.T, u string) *Bucket {
	t.Helper()
	b, err := OpenBucket(context.Background(), u)
	require.NoError(t, err, "OpenBucket(%q)", u)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func mustPut(t *testing.T, b *Bucket, key, data string) {
	t.Helper()
	require.NoError(t, b.Put(context.Background(), key, []byte(data)), "Put(%q)", key)
}

func mustGet(t *testing.T, b *Bucket, key string) string {
	t.Helper()
	data, err := b.Get(context.Background(), key)
	require.NoError(t, err, "Get(%q)", key)
	return string(data)
}

func listKeys(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	objs, err := b.List(context.Background(), prefix)
	require.NoError(t, err, "List(%q)", prefix)
	keys := []string{}
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func listDirs(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	dirs, err := b.ListDirs(context.Background(), prefix)
	require.NoError(t, err, "ListDirs(%q)", prefix)
	if dirs == nil {
		dirs = []string{}
	}
	return dirs
}

// tempFilesUnder returns every file:// temp file left under root.
func tempFilesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestOpenBucketSchemes: the gocloud schemes are registered, bad URLs are refused.
func TestOpenBucketSchemes(t *testing.T) {
	// The gocloud schemes must be registered on walkeeper's mux (gocloud.go).
	// file:// and mem:// are native (file.go, mem.go).
	for _, s := range []string{"s3", "gs", "azblob"} {
		require.True(t, gocloudMux.ValidBucketScheme(s), "scheme %q not registered", s)
	}
	ctx := context.Background()
	for _, u := range []string{"ftp://x/y", "nope", "file://otherhost/tmp/x", "file://", "mem://x?bogus=1", "%zz"} {
		b, err := OpenBucket(ctx, u)
		if err == nil {
			_ = b.Close()
			t.Errorf("OpenBucket(%q) succeeded, want error", u)
		}
	}
	for _, u := range []string{"ftp://x/y", "s3://", "gs://", "azblob://", "s3:///key",
		"s3://b?endpoint=http://127.0.0.1:9000%", "gs://b?x=%zz", "azblob://b?%",
		// gocloud's own refusals, and values it takes but that fail only at the first request.
		"s3://b?region=us-east-1&bogus=1", "s3://b?region=us-east-1&use_path_style=maybe",
		"s3://b?region=us-east-1&endpoint=ftp://x", "s3://b?region=us-east-1&endpoint=127.0.0.1:9000",
		"s3://b?region=us-east-1&endpoint=", "s3://b?region=us-east-1&awssdk=v9",
		"gs://b?bogus=1", "gs://b?grpc=true", "gs://b?zonal=1", "azblob://b?protocol=ftp"} {
		_, err := OpenBucket(ctx, u)
		require.ErrorIs(t, err, ErrInvalidInput, u)
	}
	// S3 URLs open without touching the network (credentials are resolved lazily).
	for _, u := range []string{"s3://walkeeper-test-bucket?region=us-east-1",
		"s3://b?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true&awssdk=v2",
		"s3://b?region=us-east-1&endpoint=https://minio.internal"} {
		b, err := OpenBucket(ctx, u)
		require.NoError(t, err, u)
		require.Equal(t, u, b.URL())
		require.NoError(t, b.Close(), u)
	}
}

// TestMemBucketSharedByURL: several handles on one mem:// URL are one bucket; another URL is
// another bucket; closing a handle keeps the data for the others and for a reopen.
func TestMemBucketSharedByURL(t *testing.T) {
	ctx := context.Background()
	u := newMemURL()
	b1 := mustOpen(t, u)
	b2 := mustOpen(t, u)
	mustPut(t, b1, "k", "v")
	require.Equal(t, "v", mustGet(t, b2, "k"), "the second handle")
	require.ErrorIs(t, b2.PutIfAbsent(ctx, "k", []byte("w")), ErrAlreadyExists, "through the second handle")
	_, err := mustOpen(t, newMemURL()).Get(ctx, "k")
	require.ErrorIs(t, err, ErrNotFound, "another URL")
	require.NoError(t, b1.Close())
	require.Equal(t, "v", mustGet(t, b2, "k"), "after closing one handle")
	b3 := mustOpen(t, u)
	require.Equal(t, "v", mustGet(t, b3, "k"), "after reopen")
	require.Equal(t, u, b3.URL())
}

// TestCheckURLCreatesNothing: CheckURL refuses what OpenBucket refuses, and accepting a URL
// leaves no file:// root and no mem:// bucket behind.
func TestCheckURLCreatesNothing(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "not", "yet")
	mem := newMemURL()
	for _, u := range []string{"file://" + root + "?nosync=1", mem, "s3://b?region=us-east-1"} {
		require.NoError(t, CheckURL(ctx, u), u)
	}
	_, err := os.Stat(root)
	require.ErrorIs(t, err, fs.ErrNotExist, "CheckURL created the file:// root")
	memBuckets.Lock()
	_, registered := memBuckets.m[mem]
	memBuckets.Unlock()
	require.False(t, registered, "CheckURL registered a mem:// bucket")
	for _, u := range []string{"file://" + root + "?nosync=maybe", "mem://x?y=1", "ftp://x",
		"s3://b?region=us-east-1&profile=walkeeper-no-such-profile"} {
		require.ErrorIs(t, CheckURL(ctx, u), ErrInvalidInput, u)
	}
}

// ListPageWhere is ListPageBytes without a byte bound, as the tests page.
func (b *Bucket) ListPageWhere(ctx context.Context, prefix, after string, limit int, keep func(ObjectInfo) bool) ([]ObjectInfo, bool, error) {
	objs, more, _, err := b.ListPageBytes(ctx, prefix, after, limit, 0, keep, nil)
	return objs, more, err
}
