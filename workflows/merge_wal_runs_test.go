package workflows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/target"
	"github.com/walkeeper/walkeeper/workflows"
)

// activityCall is one activity execution as the fake activities saw it.
type activityCall struct {
	name, activityID, runID string
	local                   bool
}

// TestMergeWalActivityIDsAreUniqueAcrossRuns runs one MergeWal across continue-as-new on a
// real dev server (the SDK testsuite gives every run the same run ID and cannot continue as
// new in one environment): one pass per run, three generations, so three runs. Activities
// derive their idempotency key (the names of the files they stage) from workflow ID +
// activity ID, and activity IDs restart at each run, so the ID's middle part must be the
// run ID of the run that scheduled it: an ID built from a constant, the workflow ID or the
// first run's ID would repeat in the next run.
func TestMergeWalActivityIDsAreUniqueAcrossRuns(t *testing.T) {
	testtemporal.SkipShort(t)
	_, c := testtemporal.Start(t)
	tg := target.Target{Kind: target.KindGeneric, Name: "ids"}
	const shard, gens = "a", 3

	var mu sync.Mutex
	var calls []activityCall
	var watermark uint64
	var version uint64
	record := func(ctx context.Context, name string) {
		info := activity.GetInfo(ctx)
		mu.Lock()
		calls = append(calls, activityCall{name: name, activityID: info.ActivityID, runID: info.WorkflowExecution.RunID, local: info.IsLocalActivity})
		mu.Unlock()
	}
	list := func(ctx context.Context, _ contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
		record(ctx, contract.ListPendingShardsActivity)
		mu.Lock()
		defer mu.Unlock()
		if watermark >= gens {
			return contract.ListPendingShardsResult{}, nil
		}
		return contract.ListPendingShardsResult{Shards: []contract.ShardPending{{Shard: shard, Pending: int(gens - watermark), Watermark: watermark}}}, nil
	}
	prepare := func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		record(ctx, contract.PrepareActivity)
		mu.Lock()
		defer mu.Unlock()
		if watermark >= gens {
			return contract.PrepareResult{}, nil
		}
		info := activity.GetInfo(ctx)
		g := watermark + 1 // one generation per pass
		return contract.PrepareResult{Prepared: &contract.PreparedMerge{
			Target: p.Target, Shard: p.Shard, Generations: []uint64{g}, Through: g,
			AttemptKey: info.WorkflowExecution.ID + "/" + info.ActivityID,
			Staged:     []contract.StagedFile{{Path: "staged/" + info.ActivityID}},
		}}, nil
	}
	commit := func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
		record(ctx, contract.CommitRoundActivity)
		mu.Lock()
		defer mu.Unlock()
		var res contract.CommitRoundResult
		for _, pm := range p.Prepared {
			if watermark >= pm.Through {
				res.Shards = append(res.Shards, contract.RoundShardResult{Shard: pm.Shard, Outcome: contract.RoundAlreadyCommitted, BaseVersion: version})
				continue
			}
			watermark = pm.Through
			version++
			res.BaseVersion = version
			res.Shards = append(res.Shards, contract.RoundShardResult{Shard: pm.Shard, Outcome: contract.RoundCommitted, Reclaimed: len(pm.Generations), BaseVersion: version})
		}
		return res, nil
	}
	abort := func(ctx context.Context, p contract.AbortParams) (contract.AbortResult, error) {
		record(ctx, contract.AbortActivity)
		return contract.AbortResult{}, nil
	}
	// The shared queue and the shard's own queue, as a worker owning the shard serves them.
	for _, q := range []string{contract.TaskQueue, contract.ShardQueue(shard)} {
		w := sdkworker.New(c, q, sdkworker.Options{})
		if q == contract.TaskQueue {
			workflows.Register(w)
		}
		w.RegisterActivityWithOptions(list, activity.RegisterOptions{Name: contract.ListPendingShardsActivity})
		w.RegisterActivityWithOptions(prepare, activity.RegisterOptions{Name: contract.PrepareActivity})
		w.RegisterActivityWithOptions(commit, activity.RegisterOptions{Name: contract.CommitRoundActivity})
		w.RegisterActivityWithOptions(abort, activity.RegisterOptions{Name: contract.AbortActivity})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := contract.StartMergeWal(ctx, c, tg, contract.MergeWalInput{PassesPerWorkflowRun: 1, MaxShardsPerCommit: 1})
	require.NoError(t, err)
	var res contract.MergeWalResult
	require.NoError(t, run.Get(ctx, &res)) // follows the continue-as-new chain
	require.Equal(t, gens, res.Reclaimed)
	require.GreaterOrEqual(t, res.WorkflowRuns, gens, "one committed pass per run")

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	runs := map[string]bool{}
	locals := 0
	for _, cl := range calls {
		if cl.local {
			// Listings are local activities: the SDK numbers them
			// itself, no ActivityID option applies, and they stage nothing, so no
			// idempotency key is derived from their ID.
			require.Equal(t, contract.ListPendingShardsActivity, cl.name, "only listings run locally")
			locals++
			continue
		}
		require.False(t, seen[cl.activityID], "activity id %s used twice across runs", cl.activityID)
		seen[cl.activityID] = true
		parts := strings.Split(cl.activityID, "/")
		require.Len(t, parts, 3, cl.activityID)
		require.Equal(t, cl.runID, parts[1], "activity id %s: middle part is not the run ID of the run that scheduled it", cl.activityID)
		runs[cl.runID] = true
	}
	require.GreaterOrEqual(t, len(runs), gens, "prepares and commits came from %d runs: the merge did not continue as new", len(runs))
	require.GreaterOrEqual(t, locals, gens, "every run lists its shards as a local activity")
	t.Logf("%d activity calls over %d runs, e.g. %v", len(calls), len(runs), calls[len(calls)-1])
}
