package store

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// A copy of an old WAL object put under a position above the shard's replay_after (a
// restore, a copy, a hand edit) holds rows the shard sealed long ago, with their sequences.
// Once a compaction has dropped the tombstone of a later delete, nothing newer hides them, so
// a claim that replayed the copy brought the deleted key back; its rows are at or below the
// shard manifest's max_seq, which no write above replay_after can be, and are skipped.
func TestFindingStaleWALCopyAboveReplayAfterIsNotReplayed(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	var ahead atomic.Int64
	db, s := newGenericStore(t, url, "stalewal", aheadClock(&ahead))
	shard := db.Shard()

	appendRows(t, s, row("k", 1))
	positions := call(db.listWAL(ctx, s.target, shard)).must(t)
	require.NotEmpty(t, positions)
	old := call(db.bucket.Get(ctx, walKey(s.target, shard, positions[len(positions)-1]))).must(t)
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	require.NoError(t, s.Delete(ctx, "k"))
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	ahead.Store(int64(tombstonesSettle))
	call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.ErrorIs(t, errOf(s.Get(ctx, "k")), ErrNotFound, "deleted")

	require.NoError(t, db.bucket.PutIfAbsent(ctx, walKey(s.target, shard, 1000), old))
	// A restarted process claims the shard again and replays what is above replay_after.
	db2 := openTestDB(t, url, "w1", aheadClock(&ahead))
	s2 := openGeneric(t, db2, "stalewal")
	appendRows(t, s2, row("other", 2))
	require.ErrorIs(t, errOf(s2.Get(ctx, "k")), ErrNotFound, "a deleted key must not come back from a stale WAL copy")
	flush(t, s2)
	call(s2.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s2.Get(ctx, "k")), ErrNotFound, "a deleted key must not come back from a stale WAL copy")
	got := call(s2.Get(ctx, "other")).must(t)
	require.EqualValues(t, 2, got["n"])
	require.Equal(t, 1.0, foreignCount(db2.metrics, foreignWAL), "the stale copy is counted as foreign")
	require.False(t, onStorage(t, db2.bucket, walKey(s.target, shard, 1000)), "the next seal passes it and deletes it")
}
