package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
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

// TestRecordedMergeWalActions counts the billable actions (Temporal Cloud's definition,
// internal/actioncount) of the recorded MergeWal histories in testdata/replay and fails if a
// run grows beyond its budget: a one-shard run of one pass at most oneShardRunActions, any run
// at most mergeRunOverheadActions + mergePassActions per pass, so at most that per merged
// generation of a one-generation pass; no timer, one upsert. It also holds the run's own count
// (MergeWalResult.Actions, the memo's "actions") to its history's.
func TestRecordedMergeWalActions(t *testing.T) {
	for _, name := range []string{"merge-wal-one-shard.json", "merge-wal-serial.json", "merge-wal-parallel.json"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "replay", name))
			require.NoError(t, err)
			defer f.Close()
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			c := actioncount.Events(h.GetEvents())

			last := h.GetEvents()[len(h.GetEvents())-1]
			require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, last.GetEventType())
			var res contract.MergeWalResult
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(
				last.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res))
			require.Positive(t, res.Reclaimed)

			perGeneration := float64(c.Actions) / float64(res.Reclaimed)
			t.Logf("%s: %d shard(s), %d passes, %d generations: %d actions (%d activities, %d local-activity tasks, %d upserts, %d timers, %d signals), %.2f per generation, $%.0f per million generations at list price",
				name, len(res.Shards), res.Passes, res.Reclaimed, c.Actions, c.Activities, c.LocalActivityTasks, c.Upserts, c.Timers, c.Signals,
				perGeneration, actioncount.USDPerMillion(float64(c.Actions), float64(res.Reclaimed)))
			require.Equal(t, c.Actions, res.Actions, "the run's own count against its history's")
			require.Zero(t, c.Timers, "no timer on the happy path")
			require.Equal(t, 1, c.Upserts, "the outcome only: the start sets the rest")
			budget := mergeRunOverheadActions + mergePassActions*res.Passes
			require.LessOrEqual(t, c.Actions, budget, "actions of a run of %d passes", res.Passes)
			require.LessOrEqual(t, perGeneration, float64(budget)/float64(res.Reclaimed))
			if len(res.Shards) == 1 && res.Passes == 1 {
				require.LessOrEqual(t, c.Actions, oneShardRunActions, "a one-shard, one-pass run")
			}
		})
	}
}
