package store

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The store on s3:// for real: an in-process S3-compatible server (gofakes3 behind
// internal/testkit/s3test's atomic conditional-write wrapper) reached over HTTP through gocloud's
// s3blob and the AWS SDK, the same stack a worker uses against AWS S3. docs/STORAGE.md says
// what a server must support; these tests and the bucket layer's (objstore/s3_test.go,
// objstore/conformance_test.go) are the proof for the one we ship.
//
// t.Setenv (AWS credentials) forbids t.Parallel in these tests.

// s3ExternalEnv points the S3 tests at an endpoint of your own instead of the in-process
// server, e.g. WALKEEPER_S3_TEST_URL='s3://my-bucket?region=eu-west-1' (no prefix=
// parameter: every test adds its own random one and leaves its objects behind). The AWS
// credentials come from the environment as usual. See docs/STORAGE.md.
const s3ExternalEnv = "WALKEEPER_S3_TEST_URL"

// s3URL is a fresh, empty S3 storage root for one test: a bucket on an in-process server, or
// a random prefix of the endpoint named by WALKEEPER_S3_TEST_URL.
func s3URL(t *testing.T) string {
	t.Helper()
	if ext := os.Getenv(s3ExternalEnv); ext != "" {
		return s3WithPrefix(ext, s3test.NewBucketName()+"/")
	}
	return s3test.Start(t)
}

// s3WithPrefix adds p to the URL's prefix= parameter (gocloud's key prefix).
func s3WithPrefix(u, p string) string {
	if i := strings.Index(u, "prefix="); i >= 0 {
		return u[:i+len("prefix=")] + s3PrefixOf(u) + p + u[i+len("prefix=")+len(s3PrefixOf(u)):]
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "prefix=" + p
}

func s3PrefixOf(u string) string {
	i := strings.Index(u, "prefix=")
	if i < 0 {
		return ""
	}
	rest := u[i+len("prefix="):]
	if j := strings.IndexByte(rest, '&'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// openS3Bucket opens url for the test.
func openS3Bucket(t *testing.T, url string) *objstore.Bucket {
	t.Helper()
	b := call(objstore.OpenBucket(context.Background(), url)).must(t)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestS3PrefixIsolatesRoots: gocloud's ?prefix= parameter gives each storage root its own
// key space in one bucket (the path part of an s3:// URL is ignored by gocloud).
func TestS3PrefixIsolatesRoots(t *testing.T) {
	url := s3URL(t)
	a := openTestDB(t, s3WithPrefix(url, "tenant-a/"), "w1")
	bdb := openTestDB(t, s3WithPrefix(url, "tenant-b/"), "w1")
	createGeneric(t, a, "same", false)
	createGeneric(t, bdb, "same", false) // no ErrAlreadyExists: another root

	raw := openS3Bucket(t, url)
	keys := listKeys(t, raw, "")
	require.Contains(t, keys, "tenant-a/_registry/generic/same.json")
	require.Contains(t, keys, "tenant-b/_registry/generic/same.json")
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "tenant-a/") || strings.HasPrefix(k, "tenant-b/"), k)
	}
}

// TestS3AppendFlushMergeReadRoundTrip: the whole store life cycle on S3 — create, append from
// two shards, overwrite and delete across shards, seal, read before and after merge from a
// third process, compact, reopen — and the object layout docs/FORMAT.md promises.
func TestS3AppendFlushMergeReadRoundTrip(t *testing.T) {
	ctx := context.Background()
	url := s3URL(t)
	w1 := openTestDB(t, url, "w1")
	w2 := openTestDB(t, url, "w2")
	s1 := createGeneric(t, w1, "rt", false)
	s2 := openGeneric(t, w2, "rt")

	for i := 0; i < 40; i++ {
		appendRows(t, s1, row(fmt.Sprintf("k%02d", i), int64(i)))
		if i%10 == 9 {
			flush(t, s1)
		}
	}
	appendRows(t, s2, row("k05", 500), row("x1", 1)) // newer version of k05 from another shard
	require.NoError(t, s2.Delete(ctx, "k07"))
	flush(t, s2)
	require.NoError(t, s1.Delete(ctx, "k08"))
	seal(t, s1, Row{Key: "nulls", Values: []any{"nulls", nil, nil}})

	want := map[string]int64{"x1": 1, "nulls": -1}
	for i := 0; i < 40; i++ {
		want[fmt.Sprintf("k%02d", i)] = int64(i)
	}
	want["k05"] = 500
	delete(want, "k07")
	delete(want, "k08")

	reader := openGeneric(t, openTestDB(t, url, "reader"), "rt")
	require.Equal(t, want, allRows(t, reader, SourceAll), "before merge")
	require.Empty(t, allRows(t, reader, SourceBase))
	require.Len(t, call(reader.Stats(ctx)).must(t).Shards, 2)

	// Any handle merges every shard (MergeAll visits all pending shards): 5 + 1 generations.
	require.Equal(t, 6, call(s1.MergeAll(ctx)).must(t)+call(s2.MergeAll(ctx)).must(t))
	require.Equal(t, want, allRows(t, reader, SourceAll), "after merge")
	require.Equal(t, want, allRows(t, reader, SourceBase))
	require.Empty(t, allRows(t, reader, SourceWAL))
	require.EqualValues(t, 500, toInt64(call(reader.Get(ctx, "k05")).must(t)["n"]))
	require.ErrorIs(t, errOf(reader.Get(ctx, "k07")), ErrNotFound)

	res := call(s1.CompactBase(ctx, CompactParams{})).must(t)
	require.True(t, res.Committed, "%+v", res)
	require.Equal(t, want, allRows(t, reader, SourceBase), "after compaction")

	// Layout (docs/FORMAT.md §1) and no leftovers: no generation files, no WAL objects of
	// merged data, every data/ file referenced by the latest manifest.
	raw := openS3Bucket(t, url)
	keys := listKeys(t, raw, "")
	require.Contains(t, keys, "_registry/generic/rt.json")
	require.Contains(t, keys, "generic/rt/store.json")
	base := call(reader.loadBase(ctx)).must(t)
	require.Contains(t, keys, fmt.Sprintf("generic/rt/_versions/%020d.json", base.Version))
	for _, shard := range []string{w1.Shard(), w2.Shard()} {
		require.Empty(t, genFilesOnDisk(t, reader, shard), "merged generation files deleted")
	}
	var live []string
	for _, r := range base.Runs {
		live = append(live, r.Path)
	}
	data := listKeys(t, raw, "generic/rt/data/")
	require.Subset(t, data, live)

	// A fresh process sees the same after closing everything.
	require.NoError(t, w1.Close(ctx))
	require.NoError(t, w2.Close(ctx))
	again := openGeneric(t, openTestDB(t, url, "w1"), "rt")
	require.Equal(t, want, allRows(t, again, SourceAll))
	require.True(t, reflect.DeepEqual(want, allRows(t, again, SourceBase)))
}
