package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The operator's path through a damaged generation: the error names the object, the command
// sets it aside, and the store merges and lists again.
func TestQuarantineCommand(t *testing.T) {
	ctx := context.Background()
	url, s, bucket := quarantineFixture(t, "qc")
	var err error
	for _, k := range []string{"a", "b"} {
		_, err = s.Append(ctx, []store.Row{{Key: k, Values: []any{k}}})
		require.NoError(t, err)
		_, err = s.Flush(ctx)
		require.NoError(t, err)
	}
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.TotalPending())

	// Damage the first generation through a second handle: find its key from the error.
	var genKey string
	objs, err := bucket.List(ctx, "generic/qc/_mem_wal/")
	require.NoError(t, err)
	for _, o := range objs {
		if strings.Contains(o.Key, "/gen/") && genKey == "" {
			genKey = o.Key
		}
	}
	require.NotEmpty(t, genKey)
	require.NoError(t, bucket.Put(ctx, genKey, []byte("damaged")))
	_, err = s.MergeAll(ctx)
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Contains(t, err.Error(), genKey)

	code, _, stderr := runCLI(t, "quarantine", "generic:qc", genKey, "--storage", url)
	require.Equal(t, 2, code, "missing --reason is a usage error: %s", stderr)
	// A store that does not exist is bad input, as for merge and compact.
	code, _, stderr = runCLI(t, "quarantine", "generic:nope", genKey, "--storage", url, "--reason", "r")
	require.Equal(t, 2, code, "a missing store is bad input: %s", stderr)
	require.Contains(t, stderr, "generic:nope")
	// A reason the manifest would repeat in every later version is bounded, and must be one
	// line of UTF-8: each is refused with exit 2 and one line, and nothing is set aside (the
	// next quarantine is the first).
	for _, bad := range []string{strings.Repeat("r", store.MaxQuarantineReasonBytes+1), "bad \xff byte", "two\nlines"} {
		code, _, stderr = runCLI(t, "quarantine", "generic:qc", genKey, "--storage", url, "--reason", bad)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, "reason")
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	}
	code, out, stderr := runCLI(t, "quarantine", "generic:qc", genKey, "--storage", url, "--reason", "test damage")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "quarantined generation 1")
	require.Contains(t, out, "1 no longer read")
	code, out, _ = runCLI(t, "quarantine", "generic:qc", genKey, "--storage", url, "--reason", "again")
	require.Equal(t, 0, code)
	require.Contains(t, out, "already quarantined")

	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	page, err := s.List(ctx, store.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Rows, 1)
	require.Equal(t, "b", page.Rows[0]["id"])
}

// The operator's path through a damaged WAL object: the owner's appends fail naming it, the
// command sets it aside from another process, and the same owner appends again without a
// restart, the rows only that object held given up.
func TestQuarantineCommandSetsAsideAWALObject(t *testing.T) {
	ctx := context.Background()
	url := "file://" + filepath.ToSlash(t.TempDir())
	opts := store.DefaultOptions()
	opts.InstanceID = "w1"
	target := store.Target{Kind: store.KindGeneric, Name: "qw"}
	schema := &store.Schema{Fields: []store.Field{{Name: "id", Type: store.TypeString}}}
	db, err := store.OpenDB(ctx, url, opts)
	require.NoError(t, err)
	s, err := db.Create(ctx, target, store.CreateOptions{Schema: schema})
	require.NoError(t, err)
	for _, k := range []string{"a", "b"} {
		_, err = s.Append(ctx, []store.Row{{Key: k, Values: []any{k}}})
		require.NoError(t, err)
	}
	// The process dies without sealing: its WAL holds a and b, and b's object gets damaged.
	bucket, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	defer func() { _ = bucket.Close() }()
	objs, err := bucket.List(ctx, "generic/qw/_mem_wal/"+db.Shard()+"/wal/")
	require.NoError(t, err)
	walKey := objs[len(objs)-1].Key
	require.NoError(t, bucket.Put(ctx, walKey, []byte("damaged")))

	owner, err := store.OpenDB(ctx, url, opts)
	require.NoError(t, err)
	defer func() { _ = owner.Close(ctx) }()
	s, err = owner.Open(ctx, target)
	require.NoError(t, err)
	_, err = s.Append(ctx, []store.Row{{Key: "c", Values: []any{"c"}}})
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.Contains(t, err.Error(), walKey)

	code, out, stderr := runCLI(t, "quarantine", "generic:qw", walKey, "--storage", url, "--reason", "test damage")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "quarantined WAL object of shard "+owner.Shard())
	_, err = s.Append(ctx, []store.Row{{Key: "c", Values: []any{"c"}}})
	require.NoError(t, err)
	page, err := s.List(ctx, store.ListOptions{})
	require.NoError(t, err)
	var keys []string
	for _, r := range page.Rows {
		keys = append(keys, r["id"].(string))
	}
	require.Equal(t, []string{"a", "c"}, keys)
}

// The operator's path back: a repaired run set aside earlier is released, a still damaged
// one is refused in one line with nothing written, and --release with --reason is misuse.
func TestQuarantineReleaseCommand(t *testing.T) {
	ctx := context.Background()
	url, s, bucket := quarantineFixture(t, "qr")
	_, err := s.Append(ctx, []store.Row{{Key: "a", Values: []any{"a"}}})
	require.NoError(t, err)
	_, err = s.Flush(ctx)
	require.NoError(t, err)
	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	runs, err := bucket.List(ctx, "generic/qr/data/")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	run := runs[0].Key
	intact, err := bucket.Get(ctx, run)
	require.NoError(t, err)
	require.NoError(t, bucket.Put(ctx, run, []byte("damaged")))
	code, _, stderr := runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--reason", "test damage")
	require.Equal(t, 0, code, stderr)

	code, _, stderr = runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--release", "--reason", "r")
	require.Equal(t, 2, code, "--release with --reason is misuse: %s", stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	code, _, stderr = runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--release")
	require.Equal(t, 1, code, "a still damaged run is refused: %s", stderr)
	require.Contains(t, stderr, "corrupt")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Quarantined, "the refused release wrote nothing")

	require.NoError(t, bucket.Put(ctx, run, intact))
	code, _, stderr = runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--release", "--merge-budget-bytes", "100")
	require.Equal(t, 1, code, "a run longer than the merge budget given is refused unread: %s", stderr)
	require.Contains(t, stderr, "is longer than the 100 bytes a release reads")
	code, out, stderr := runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--release")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "released run")
	require.Contains(t, out, "1 read again")
	code, out, _ = runCLI(t, "quarantine", "generic:qr", run, "--storage", url, "--release")
	require.Equal(t, 0, code)
	require.Contains(t, out, "not quarantined")
	page, err := s.List(ctx, store.ListOptions{Source: store.SourceBase})
	require.NoError(t, err)
	require.Len(t, page.Rows, 1)
}

// quarantineFixture creates the generic store name (a string "id") on a new file storage,
// as instance w1, and opens the storage's bucket beside it to damage objects through.
func quarantineFixture(t *testing.T, name string) (url string, s *store.Store, bucket *objstore.Bucket) {
	ctx := context.Background()
	url = "file://" + filepath.ToSlash(t.TempDir())
	opts := store.DefaultOptions()
	opts.InstanceID = "w1"
	db, err := store.OpenDB(ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	s, err = db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: name},
		store.CreateOptions{Schema: &store.Schema{Fields: []store.Field{{Name: "id", Type: store.TypeString}}}})
	require.NoError(t, err)
	bucket, err = objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	return url, s, bucket
}

// A WAL object's read limit follows --memtable-bytes and --group-commit-max-rows (decision
// 0731), so the release takes them as the workers do: the same intact object is refused as
// damaged under settings smaller than its writer's and released under its writer's.
func TestQuarantineReleaseReadsWALObjectsWithTheWorkersSettings(t *testing.T) {
	ctx := context.Background()
	url, _, bucket := quarantineFixture(t, "unused")
	opts := store.DefaultOptions()
	opts.InstanceID = "w2"
	db, err := store.OpenDB(ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	s, err := db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: "qws"}, store.CreateOptions{Schema: &store.Schema{
		Fields: []store.Field{{Name: "id", Type: store.TypeString}, {Name: "payload", Type: store.TypeString}}}})
	require.NoError(t, err)
	rows := make([]store.Row, 12)
	for i := range rows {
		k := fmt.Sprintf("k%02d", i)
		rows[i] = store.Row{Key: k, Values: []any{k, strings.Repeat("x", 100<<10)}}
	}
	_, err = s.Append(ctx, rows) // one WAL object of about 1.2 MB, past the limit of the smallest settings
	require.NoError(t, err)
	objs, err := bucket.List(ctx, "generic/qws/_mem_wal/")
	require.NoError(t, err)
	var walKey string
	for _, o := range objs {
		if strings.Contains(o.Key, "/wal/") {
			walKey = o.Key
		}
	}
	require.NotEmpty(t, walKey, "objects: %v", objs)
	intact, err := bucket.Get(ctx, walKey)
	require.NoError(t, err)
	smallest := int64(2 + 5_176 + 1<<20) // 2 × 1 + 1 × 5,176 + 1 MiB
	require.Greater(t, int64(len(intact)), smallest)

	require.NoError(t, bucket.Put(ctx, walKey, []byte("damaged")))
	code, _, stderr := runCLI(t, "quarantine", "generic:qws", walKey, "--storage", url, "--reason", "test damage")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, bucket.Put(ctx, walKey, intact))

	code, _, stderr = runCLI(t, "quarantine", "generic:qws", walKey, "--storage", url, "--release", "--memtable-bytes", "0")
	require.Equal(t, 2, code, "a setting the worker refuses is misuse: %s", stderr)
	require.Contains(t, stderr, "--memtable-bytes")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)

	code, _, stderr = runCLI(t, "quarantine", "generic:qws", walKey, "--storage", url, "--release",
		"--memtable-bytes", "1", "--group-commit-max-rows", "1")
	require.Equal(t, 1, code, "an object longer than these settings allow is refused: %s", stderr)
	require.Contains(t, stderr, "corrupt")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Quarantined, "the refused release wrote nothing")

	code, out, stderr := runCLI(t, "quarantine", "generic:qws", walKey, "--storage", url, "--release")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "released")
}
