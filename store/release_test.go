package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A quarantined base run goes back only once it holds what it held: still damaged, or
// replaced by other rows, the release is ErrCorrupt and publishes nothing. Its rows are read
// again after, and a row deleted while it was set aside stays deleted although a compaction
// of every live run ran meanwhile.
func TestReleaseRepairedRun(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, "file://"+t.TempDir(), "rr", func(o *Options) { o.MergeMaxGenerations = 1 })
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2), row("x", 2))
	seal(t, s, row("c", 3))
	_, err := s.MergeAll(ctx)
	require.NoError(t, err)
	base, err := s.loadBase(ctx)
	require.NoError(t, err)
	require.Len(t, base.Runs, 3)
	bad, other := base.Runs[1].Path, base.Runs[2].Path
	intact, err := db.bucket.Get(ctx, bad)
	require.NoError(t, err)
	otherRun, err := db.bucket.Get(ctx, other)
	require.NoError(t, err)
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("garbage")))
	db.cache.clear()
	_, err = s.Quarantine(ctx, bad, "disk returned garbage")
	require.NoError(t, err)

	require.NoError(t, s.Delete(ctx, "x"))
	flush(t, s)
	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	_, err = s.CompactBase(ctx, CompactParams{MaxRuns: -1})
	require.NoError(t, err)

	version := func() uint64 {
		b, err := s.loadBase(ctx)
		require.NoError(t, err)
		return b.Version
	}
	v := version()
	_, err = s.Release(ctx, bad)
	require.ErrorIs(t, err, ErrCorrupt, "still damaged")
	require.NoError(t, db.bucket.Put(ctx, bad, otherRun))
	_, err = s.Release(ctx, bad)
	require.ErrorIs(t, err, ErrCorrupt, "another run's bytes are not the quarantined run")
	require.Contains(t, err.Error(), "the quarantine recorded 2 rows")
	require.Equal(t, v, version(), "a refused release publishes nothing")

	require.NoError(t, db.bucket.Put(ctx, bad, intact))
	res, err := s.Release(ctx, bad)
	require.NoError(t, err)
	require.Equal(t, "run", res.Kind)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, v+1, res.ManifestVersion)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceBase), "x stays deleted")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Quarantined)
	again, err := s.Release(ctx, bad)
	require.NoError(t, err)
	require.True(t, again.NotQuarantined)
	cr, err := s.CompactBase(ctx, CompactParams{MaxRuns: -1})
	require.NoError(t, err)
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
	s, err := db.Open(ctx, tgt)
	require.NoError(t, err)
	_, err = s.Quarantine(ctx, key, "WAL object damaged")
	require.NoError(t, err)
	appendRows(t, s, row("c", 3))
	shardVersion := func() uint64 {
		m, err := s.loadShard(ctx, db.Shard())
		require.NoError(t, err)
		return m.Version
	}
	v := shardVersion()
	_, err = s.Release(ctx, key)
	require.ErrorIs(t, err, ErrCorrupt, "still damaged")
	require.Equal(t, v, shardVersion(), "a refused release publishes nothing")

	require.NoError(t, db.bucket.Put(ctx, key, intact))
	res, err := s.Release(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "wal", res.Kind)
	appendRows(t, s, row("d", 4))
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4}, allRows(t, s, SourceAll))
	again, err := s.Release(ctx, key)
	require.NoError(t, err)
	require.True(t, again.NotQuarantined)

	// Sealed past while set aside: its rows would never be replayed, so it stays aside.
	root2, tgt2, key2, intact2 := damagedWALStore(t, "rw2")
	db2 := openTestDB(t, root2, "w1")
	s2, err := db2.Open(ctx, tgt2)
	require.NoError(t, err)
	_, err = s2.Quarantine(ctx, key2, "WAL object damaged")
	require.NoError(t, err)
	appendRows(t, s2, row("c", 3))
	flush(t, s2)
	require.NoError(t, db2.bucket.Put(ctx, key2, intact2))
	_, err = s2.Release(ctx, key2)
	require.ErrorIs(t, err, ErrInvalidInput)
	require.Contains(t, err.Error(), "replay_after")

	// A generation cannot go back.
	_, err = s2.Release(ctx, "generic/rw2/_mem_wal/"+db2.Shard()+"/gen/00000000000000000001-1.arrow")
	require.ErrorIs(t, err, ErrInvalidInput)
}
