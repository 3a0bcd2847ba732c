package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// Action budgets of a happy-path MergeWal started by contract.StartMergeWal (search
// attributes at start): the start, the first and the confirming listing (one local-activity
// task each) and the outcome's upsert, plus a Prepare and a commit per pass (a round commit
// can carry the passes of several shards, so a pass costs at most 2).
const (
	mergeRunOverheadActions = 4
	mergePassActions        = 2
	// oneShardRunActions is the whole bill of a one-shard, one-pass merge.
	oneShardRunActions = 6
)

// TestRecordedMergeWalActions replays every recorded MergeWal history in testdata/replay
// that completed and holds the count the current workflow code returns
// (MergeWalResult.Actions, the memo's "actions", less what a carry brought) to the billable
// actions of that history (Temporal Cloud's definition, internal/actioncount): the run's own
// count must come out the same on replay, a reset run's included. The happy-path runs are
// also held to their budgets: a one-shard run of one pass at most oneShardRunActions, any run
// at most mergeRunOverheadActions + mergePassActions per pass; no timer, one upsert.
func TestRecordedMergeWalActions(t *testing.T) {
	budgeted := map[string]bool{"merge-wal-one-shard.json": true, "merge-wal-serial.json": true, "merge-wal-parallel.json": true}
	files, err := filepath.Glob(filepath.Join(replayDir, "merge-wal*.json"))
	require.NoError(t, err)
	replayed := 0
	for _, f := range files {
		h := readHistory(t, f)
		events := h.GetEvents()
		started := events[0].GetWorkflowExecutionStartedEventAttributes()
		if started.GetWorkflowType().GetName() != contract.MergeWalWorkflow ||
			events[len(events)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
			continue
		}
		replayed++
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			var in contract.MergeWalInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in))
			// The SDK's replayer keeps the result the replayed code completed with, behind its
			// interface.
			results, ok := replay(t, h).(interface{ GetWorkflowResult(string, any) error })
			require.True(t, ok, "the SDK's replayer no longer offers GetWorkflowResult")
			var res contract.MergeWalResult
			require.NoError(t, results.GetWorkflowResult("", &res), "the replayed run's result")

			c := actioncount.Events(events)
			carried := 0
			if in.Carry != nil {
				carried = in.Carry.Actions
			}
			require.Equal(t, c.Actions, res.Actions-carried, "the replayed run's own count against its history's")
			if !budgeted[name] {
				return
			}
			require.Positive(t, res.Reclaimed)
			perGeneration := float64(c.Actions) / float64(res.Reclaimed)
			t.Logf("%s: %d shard(s), %d passes, %d generations: %d actions (%d activities, %d local-activity tasks, %d upserts, %d timers, %d signals), %.2f per generation, $%.0f per million generations at list price",
				name, len(res.Shards), res.Passes, res.Reclaimed, c.Actions, c.Activities, c.LocalActivityTasks, c.Upserts, c.Timers, c.Signals,
				perGeneration, actioncount.USDPerMillion(float64(c.Actions), float64(res.Reclaimed)))
			require.Zero(t, c.Timers, "no timer on the happy path")
			require.Equal(t, 1, c.Upserts, "the outcome only: the start sets the rest")
			budget := mergeRunOverheadActions + mergePassActions*res.Passes
			require.LessOrEqual(t, c.Actions, budget, "actions of a run of %d passes", res.Passes)
			if len(res.Shards) == 1 && res.Passes == 1 {
				require.LessOrEqual(t, c.Actions, oneShardRunActions, "a one-shard, one-pass run")
			}
		})
	}
	require.GreaterOrEqual(t, replayed, len(budgeted), "recorded MergeWal histories in %s", replayDir)
}
