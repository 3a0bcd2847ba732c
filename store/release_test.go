package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// A quarantined base run goes back only once it holds what it held: still damaged, or
// replaced by other rows, the release is ErrCorrupt and publishes nothing. Its rows are read
// again after, and a row deleted while it was set aside stays deleted although a compaction
// of every live run ran meanwhile.
func TestReleaseRepairedRun(t *testing.T) {
	ctx := context.Background()
	var ahead atomic.Int64
	db, s := newGenericStore(t, "file://"+t.TempDir(), "rr", func(o *Options) { o.MergeMaxGenerations = 1 }, aheadClock(&ahead))
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2), row("x", 2))
	seal(t, s, row("c", 3))
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 3)
	bad, other := base.Runs[1].Path, base.Runs[2].Path
	intact := getObject(t, db.bucket, bad)
	otherRun := getObject(t, db.bucket, other)
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("garbage")))
	db.cache.clear()
	call(s.Quarantine(ctx, bad, "disk returned garbage")).must(t)

	require.NoError(t, s.Delete(ctx, "x"))
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	ahead.Store(int64(tombstonesSettle)) // the quarantine, not the tombstone's youth, keeps it
	call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)

	version := func() uint64 { return call(s.loadBase(ctx)).must(t).Version }
	v := version()
	require.ErrorIs(t, errOf(s.Release(ctx, bad)), ErrCorrupt, "still damaged")
	require.NoError(t, db.bucket.Put(ctx, bad, otherRun))
	_, err := s.Release(ctx, bad)
	require.ErrorIs(t, err, ErrCorrupt, "another run's bytes are not the quarantined run")
	require.Contains(t, err.Error(), "the quarantine recorded 2 rows")
	require.Equal(t, v, version(), "a refused release publishes nothing")

	require.NoError(t, db.bucket.Put(ctx, bad, intact))
	res := call(s.Release(ctx, bad)).must(t)
	require.Equal(t, "run", res.Kind)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, v+1, res.ManifestVersion)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceBase), "x stays deleted")
	require.Zero(t, call(s.Stats(ctx)).must(t).Quarantined)
	require.True(t, call(s.Release(ctx, bad)).must(t).NotQuarantined)
	cr := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, cr.Committed, "the released run compacts like any other")
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceBase))
}

// A quarantined WAL object goes back only while its shard has not sealed past it, and only
// once it passes its header checksum; the release fences the shard's owner, whose next
// append claims the shard again and replays the object's rows.
func TestReleaseRepairedWALObject(t *testing.T) {
	ctx := context.Background()
	root, tgt, key, intact := damagedWALStore(t, "rw")
	db := openTestDB(t, root, "w1")
	s := openGeneric(t, db, tgt.Name)
	call(s.Quarantine(ctx, key, "WAL object damaged")).must(t)
	appendRows(t, s, row("c", 3))
	shardVersion := func() uint64 { return call(s.loadShard(ctx, db.Shard())).must(t).Version }
	v := shardVersion()
	require.ErrorIs(t, errOf(s.Release(ctx, key)), ErrCorrupt, "still damaged")
	require.Equal(t, v, shardVersion(), "a refused release publishes nothing")

	require.NoError(t, db.bucket.Put(ctx, key, intact))
	require.Equal(t, "wal", call(s.Release(ctx, key)).must(t).Kind)
	appendRows(t, s, row("d", 4))
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4}, allRows(t, s, SourceAll))
	require.True(t, call(s.Release(ctx, key)).must(t).NotQuarantined)

	// Sealed past while set aside: its rows would never be replayed, so it stays aside.
	root2, tgt2, key2, intact2 := damagedWALStore(t, "rw2")
	db2 := openTestDB(t, root2, "w1")
	s2 := openGeneric(t, db2, tgt2.Name)
	call(s2.Quarantine(ctx, key2, "WAL object damaged")).must(t)
	seal(t, s2, row("c", 3))
	require.NoError(t, db2.bucket.Put(ctx, key2, intact2))
	_, err := s2.Release(ctx, key2)
	require.ErrorIs(t, err, ErrInvalidInput)
	require.Contains(t, err.Error(), "replay_after")

	// A generation cannot go back.
	require.ErrorIs(t, errOf(s2.Release(ctx, "generic/rw2/_mem_wal/"+db2.Shard()+"/gen/00000000000000000001-1.arrow")), ErrInvalidInput)
}

// quarantinedRun merges rows into one base run of a new store on root, sets the run aside
// and returns its manifest entry as it was listed.
func quarantinedRun(t *testing.T, root, name string, rows ...Row) (*DB, *Store, manifest.Run) {
	t.Helper()
	ctx := context.Background()
	db, s := newGenericStore(t, root, name)
	seal(t, s, rows...)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 1)
	call(s.Quarantine(ctx, base.Runs[0].Path, "set aside by the test")).must(t)
	return db, s, base.Runs[0]
}

// A release read the object at a quarantined run's path whole, so a stray object there of
// any size was read into the command's memory, and decoded whole besides. Now it reads at
// most the merge budget's limit, 3 GiB by default, refusing a longer object as damaged
// without reading it, in a process that could not hold it; a run of normal size still goes
// back.
func TestFindingHugeStrayObjectAtAQuarantinedRunIsRefusedUnderAMemoryLimit(t *testing.T) {
	if !underMemoryLimit(t, 3<<30) {
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	db, s, run := quarantinedRun(t, "file://"+dir, "stray", row("a", 1), row("b", 2))
	intact := getObject(t, db.bucket, run.Path)
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(run.Path)))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<30)) // sparse: no disk, all of it read only if asked for
	require.NoError(t, f.Close())

	_, err = s.Release(ctx, run.Path)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "longer than the 3221225472 bytes")
	require.Equal(t, 1.0, testutil.ToFloat64(db.metrics.CorruptObjects.WithLabelValues(string(KindGeneric))))

	require.NoError(t, db.bucket.Put(ctx, run.Path, intact))
	require.EqualValues(t, 2, call(s.Release(ctx, run.Path)).must(t).Rows)
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceBase))
}

// A release reads at most the merge budget's limit of a run: no merge or compaction under
// that budget writes a longer one. A run one byte longer is refused as damaged and nothing is
// published; under a budget of its size it goes back.
func TestReleaseRefusesARunLongerThanTheMergeBudget(t *testing.T) {
	ctx := context.Background()
	root := newMemURL()
	db, s, run := quarantinedRun(t, root, "budget", row("a", 1), row("b", 2))
	base := call(s.loadBase(ctx)).must(t)

	small := openGeneric(t, openTestDB(t, root, "w2", func(o *Options) { o.Budget = NewBudget(run.Bytes - 1) }), "budget")
	_, err := small.Release(ctx, run.Path)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "longer than")
	require.Equal(t, base.Version, call(s.loadBase(ctx)).must(t).Version, "a refused release publishes nothing")

	fits := openGeneric(t, openTestDB(t, root, "w3", func(o *Options) { o.Budget = NewBudget(run.Bytes) }), "budget")
	call(fits.Release(ctx, run.Path)).must(t)
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, openGeneric(t, db, "budget"), SourceBase))
}

// A released run read in many batches gets back the manifest entry it was listed with: the
// rows, key and sequence range, size and checksum of the whole object, and its tombstones
// counted.
func TestReleasedRunReadInBatchesGetsItsEntryBack(t *testing.T) {
	ctx := context.Background()
	const n = 3 * parquetRowGroup / 2
	rows := make([]Row, 0, n)
	for i := range n {
		rows = append(rows, row(fmt.Sprintf("k%06d", i), int64(i)))
	}
	db, s := newGenericStore(t, newMemURL(), "batches")
	seal(t, s, row("a", 1), row("b", 2))
	call(s.MergeAll(ctx)).must(t)
	appendRows(t, s, rows...)
	require.NoError(t, s.Delete(ctx, "a"))
	require.NoError(t, s.Delete(ctx, "b"))
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 2)
	want := base.Runs[1]
	call(s.Quarantine(ctx, want.Path, "set aside by the test")).must(t)

	rb := call(openRunBatches(ctx, nil, getObject(t, db.bucket, want.Path), s.codec, "run")).must(t)
	require.Less(t, rb.batchRows, int64(n), "the run is read in more than one batch")
	rb.close()

	call(s.Release(ctx, want.Path)).must(t)
	base = call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 2)
	got := base.Runs[1]
	want.Source = "" // not kept while set aside
	want.Deletes = 2 // the tombstones of a and b, which a merge's entry does not count
	require.Equal(t, want, got)
}
