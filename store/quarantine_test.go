package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A damaged pending generation blocks its shard's merges and every full read; quarantining
// it lets both go on, keeps the object, and hides exactly its rows.
func TestQuarantineDamagedGenerationUnblocksTheShard(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, "file://"+t.TempDir(), "q")
	seal(t, s, row("a", 1), row("b", 1))
	appendRows(t, s, row("b", 2), row("c", 2)) // the generation that gets damaged
	flush(t, s)
	seal(t, s, row("d", 3))
	sm := mustLoadShard(ctx, t, s, db.Shard())
	require.Len(t, sm.Flushed, 3)
	bad := sm.Flushed[1].Path
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("not an arrow file")))
	db.cache.clear()

	require.ErrorIs(t, errOf(s.MergeAll(ctx)), ErrCorrupt, "the damaged generation blocks its shard")
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{})), ErrCorrupt)

	require.ErrorIs(t, errOf(s.Quarantine(ctx, bad, "")), ErrInvalidInput, "a reason is required")
	require.ErrorIs(t, errOf(s.Quarantine(ctx, "generic/q/../other/x", "r")), ErrInvalidInput)
	require.ErrorIs(t, errOf(s.Quarantine(ctx, "generic/q/_mem_wal/"+db.Shard()+"/gen/99-1.arrow", "r")), ErrNotFound)

	res := mustQuarantine(ctx, t, s, bad, "checksum mismatch, backup lost")
	require.Equal(t, "generation", res.Kind)
	require.EqualValues(t, 2, res.Generation)
	require.EqualValues(t, 2, res.Rows)
	require.True(t, mustQuarantine(ctx, t, s, bad, "again").AlreadyQuarantined)

	st := mustStats(ctx, t, s)
	require.Equal(t, 1, st.Quarantined)
	require.Equal(t, 2, st.TotalPending())
	// The rows only the damaged generation held are gone from reads (b falls back to its
	// older version); everything else is intact, and merging runs to the end.
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "d": 3}, allRows(t, s, SourceAll))
	mustMergeAll(ctx, t, s)
	st = mustStats(ctx, t, s)
	require.Zero(t, st.TotalPending())
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "d": 3}, allRows(t, s, SourceBase))
	require.True(t, onStorage(t, db.bucket, bad), "clean-up after the merge must not delete a quarantined object")

	// New appends and merges go on as usual.
	seal(t, s, row("c", 4))
	mustMergeAll(ctx, t, s)
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "c": 4, "d": 3}, allRows(t, s, SourceBase))
}

func TestQuarantineDamagedRunUnblocksReadsAndCompaction(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, "file://"+t.TempDir(), "qr", func(o *Options) { o.MergeMaxGenerations = 1 })
	for i, k := range []string{"a", "b", "c"} {
		seal(t, s, row(k, int64(i+1)))
	}
	mustMergeAll(ctx, t, s)
	base := mustLoadBase(ctx, t, s)
	require.Len(t, base.Runs, 3)
	bad := base.Runs[1].Path
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("garbage")))
	db.cache.clear()
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{Source: SourceBase})), ErrCorrupt)
	require.ErrorIs(t, errOf(s.CompactBase(ctx, CompactParams{MaxRuns: -1})), ErrCorrupt)

	require.Equal(t, "run", mustQuarantine(ctx, t, s, bad, "disk returned garbage").Kind)
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceBase))
	require.True(t, mustCompact(ctx, t, s, CompactParams{MaxRuns: -1}).Committed)
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceBase))
	st := mustStats(ctx, t, s)
	require.Equal(t, 1, st.Quarantined)
	require.Equal(t, 1, st.Runs)
	require.True(t, onStorage(t, db.bucket, bad), "compaction must not delete a quarantined run")
}

// A committed merge's run that an operator quarantined is live in no manifest, yet no late
// step of the attempt that staged it may delete it: not its Abort, nor a retried commit's
// clean-up of an already committed attempt.
func TestLateMergeStepsKeepAQuarantinedRun(t *testing.T) {
	for _, late := range []string{"abort", "retried-commit"} {
		t.Run(late, func(t *testing.T) {
			ctx := context.Background()
			db := openTestDB(t, newMemURL(), "w1")
			s := createGeneric(t, db, "lq", false)
			seal(t, s, row("a", 1))
			p := mustPrepare(ctx, t, s, PrepareParams{AttemptKey: "wf/lq"})
			mustCommitRound(ctx, t, s, []*PreparedMerge{p})
			mustQuarantine(ctx, t, s, p.Staged[0].Path, "operator: bad disk")
			if late == "abort" {
				require.True(t, mustAbort(ctx, t, s, p).CommitPresent)
			} else {
				mustCommitRound(ctx, t, s, []*PreparedMerge{p})
			}
			require.True(t, onStorage(t, db.bucket, p.Staged[0].Path), "a quarantined run stays on storage")
		})
	}
}
