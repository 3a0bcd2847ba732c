package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A crash between a commit's publish and its finish leaves covered generations listed and
// on storage. Prepare plans past them and leaves them; Repair drains and deletes them, and
// repairing a clean shard does nothing.
func TestRepairFinishesAnInterruptedCommit(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, fmt.Sprintf("mem://repair-%d", testURLSeq.Add(1)), "repair")
	sealGenerations(t, s, 3)
	want := allRows(t, s, SourceAll)
	publishOnly(t, s, call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/1"})).must(t))

	require.Nil(t, call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/2"})).must(t), "nothing above the watermark")
	require.Len(t, genFilesOnDisk(t, s, db.Shard()), 3, "Prepare repairs nothing")

	res := call(s.Repair(ctx, RepairParams{})).must(t)
	require.Equal(t, RepairResult{Drained: 3, Deleted: 3}, res)
	require.Empty(t, genFilesOnDisk(t, s, db.Shard()))
	require.Equal(t, want, allRows(t, s, SourceBase))

	res = call(s.Repair(ctx, RepairParams{})).must(t)
	require.Zero(t, res)
}

// A merge stopped between its publish and its finish (its MergeWal terminated, cancelled or
// reset away; the finish's drain failed) leaves the generations the published version holds
// listed in the shard manifest, their files, their demand records and the attempt's claim.
// Only the next Prepare of that shard repaired them, and a shard whose writer never seals
// again (its instance retired) is never prepared: the reconcile deleted the demand records,
// so no merge was even started, and the rest stayed for ever. The reconcile, which reads
// every shard's manifest anyway, finishes such a merge.
func TestFindingMergeStoppedAfterItsPublishIsFinishedByTheReconcile(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://stopped-%d", testURLSeq.Add(1))
	db, s := newGenericStore(t, url, "stopped")
	sealGenerations(t, s, 3)
	want := allRows(t, s, SourceAll)
	shard := db.Shard()
	p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/generic/stopped/Prepare/run/1"})).must(t)
	publishOnly(t, s, p) // the run was stopped here: no finish, no retry
	claims := func() int {
		objs := call(s.db.bucket.List(ctx, claimPrefix(s.target, shard))).must(t)
		return len(objs)
	}
	demand := func() int {
		objs := call(s.db.bucket.List(ctx, demandShardPrefix(s.target, shard))).must(t)
		return len(objs)
	}
	require.Zero(t, pendingOf(t, s, shard), "nothing pending: no merge prepares the shard")
	require.Len(t, listedGens(t, s, shard), 3)
	require.Len(t, genFilesOnDisk(t, s, shard), 3)
	require.Equal(t, 1, claims())
	require.Equal(t, 3, demand())

	// Another process's reconcile (the writer's instance is gone).
	other := openTestDB(t, url, "reconciler")
	require.NoError(t, errOf(other.ReconcileStore(ctx, s.target)))
	require.Empty(t, listedGens(t, s, shard), "the covered generations are drained")
	require.Empty(t, genFilesOnDisk(t, s, shard), "and their files deleted")
	require.Zero(t, claims(), "the attempt's claim, which the watermark settles, is deleted")
	require.Zero(t, demand())
	require.Equal(t, want, allRows(t, openGeneric(t, other, "stopped"), SourceAll))

	// A clean store reconciles to nothing more.
	require.NoError(t, errOf(other.ReconcileStore(ctx, s.target)))
	require.Equal(t, want, allRows(t, openGeneric(t, other, "stopped"), SourceBase))
}
