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
	sm := call(s.loadShard(ctx, db.Shard())).must(t)
	require.Len(t, sm.Flushed, 3)
	bad := sm.Flushed[1].Path
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("not an arrow file")))
	db.cache.clear()

	require.ErrorIs(t, errOf(s.MergeAll(ctx)), ErrCorrupt, "the damaged generation blocks its shard")
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{})), ErrCorrupt)

	require.ErrorIs(t, errOf(s.Quarantine(ctx, bad, "")), ErrInvalidInput, "a reason is required")
	require.ErrorIs(t, errOf(s.Quarantine(ctx, "generic/q/../other/x", "r")), ErrInvalidInput)
	require.ErrorIs(t, errOf(s.Quarantine(ctx, "generic/q/_mem_wal/"+db.Shard()+"/gen/99-1.arrow", "r")), ErrNotFound)

	res := call(s.Quarantine(ctx, bad, "checksum mismatch, backup lost")).must(t)
	require.Equal(t, "generation", res.Kind)
	require.EqualValues(t, 2, res.Generation)
	require.EqualValues(t, 2, res.Rows)
	require.True(t, call(s.Quarantine(ctx, bad, "again")).must(t).AlreadyQuarantined)

	st := call(s.Stats(ctx)).must(t)
	require.Equal(t, 1, st.Quarantined)
	require.Equal(t, 2, st.TotalPending())
	// The rows only the damaged generation held are gone from reads (b falls back to its
	// older version); everything else is intact, and merging runs to the end.
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "d": 3}, allRows(t, s, SourceAll))
	call(s.MergeAll(ctx)).must(t)
	st = call(s.Stats(ctx)).must(t)
	require.Zero(t, st.TotalPending())
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "d": 3}, allRows(t, s, SourceBase))
	require.True(t, onStorage(t, db.bucket, bad), "clean-up after the merge must not delete a quarantined object")

	// New appends and merges go on as usual.
	seal(t, s, row("c", 4))
	call(s.MergeAll(ctx)).must(t)
	require.Equal(t, map[string]int64{"a": 1, "b": 1, "c": 4, "d": 3}, allRows(t, s, SourceBase))
}

func TestQuarantineDamagedRunUnblocksReadsAndCompaction(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, "file://"+t.TempDir(), "qr", func(o *Options) { o.MergeMaxGenerations = 1 })
	for i, k := range []string{"a", "b", "c"} {
		seal(t, s, row(k, int64(i+1)))
	}
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 3)
	bad := base.Runs[1].Path
	require.NoError(t, db.bucket.Put(ctx, bad, []byte("garbage")))
	db.cache.clear()
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{Source: SourceBase})), ErrCorrupt)
	require.ErrorIs(t, errOf(s.CompactBase(ctx, CompactParams{MaxRuns: -1})), ErrCorrupt)

	require.Equal(t, "run", call(s.Quarantine(ctx, bad, "disk returned garbage")).must(t).Kind)
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceBase))
	require.True(t, call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t).Committed)
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceBase))
	st := call(s.Stats(ctx)).must(t)
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
			db, s := newGenericStore(t, newMemURL(), "lq")
			seal(t, s, row("a", 1))
			p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/lq"})).must(t)
			call(s.CommitRound(ctx, []*PreparedMerge{p})).must(t)
			call(s.Quarantine(ctx, p.Staged[0].Path, "operator: bad disk")).must(t)
			if late == "abort" {
				require.True(t, call(s.Abort(ctx, p)).must(t).CommitPresent)
			} else {
				call(s.CommitRound(ctx, []*PreparedMerge{p})).must(t)
			}
			require.True(t, onStorage(t, db.bucket, p.Staged[0].Path), "a quarantined run stays on storage")
		})
	}
}
