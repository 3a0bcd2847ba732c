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
	for i := 0; i < 3; i++ {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
	want := allRows(t, s, SourceAll)
	p, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/1"})
	require.NoError(t, err)
	publishOnly(t, s, p)

	again, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/2"})
	require.NoError(t, err)
	require.Nil(t, again, "nothing above the watermark")
	require.Len(t, genFilesOnDisk(t, s, db.Shard()), 3, "Prepare repairs nothing")

	res, err := s.Repair(ctx, RepairParams{})
	require.NoError(t, err)
	require.Equal(t, RepairResult{Drained: 3, Deleted: 3}, res)
	require.Empty(t, genFilesOnDisk(t, s, db.Shard()))
	require.Equal(t, want, allRows(t, s, SourceBase))

	res, err = s.Repair(ctx, RepairParams{})
	require.NoError(t, err)
	require.Zero(t, res)
}
