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

	"github.com/walkeeper/walkeeper/internal/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/workflows"
)

// activityCall is one activity execution as the fake activities saw it.
type activityCall struct {
	name, activityID, runID string
}

// TestMergeWalActivityIDsAreUniqueAcrossRuns runs one MergeWal across continue-as-new on a
// real dev server (the SDK testsuite gives every run the same run ID and cannot continue as
// new in one environment): one pass per run, three generations, so three runs. Activities
// derive their idempotency key (the names of the files they stage) from workflow ID +
// activity ID, and activity IDs restart at each run, so the ID's middle part must be the
// run ID of the run that scheduled it: an ID built from a constant, the workflow ID or the
// first run's ID would repeat in the next run.
func TestMergeWalActivityIDsAreUniqueAcrossRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server; skipped with -short")
	}
	_, c := testtemporal.Start(t)
	target := store.Target{Kind: store.KindGeneric, Name: "ids"}
	const shard, gens = "a", 3

	var mu sync.Mutex
	var calls []activityCall
	var watermark uint64
	var version uint64
	record := func(ctx context.Context, name string) {
		info := activity.GetInfo(ctx)
		mu.Lock()
		calls = append(calls, activityCall{name: name, activityID: info.ActivityID, runID: info.WorkflowExecution.RunID})
		mu.Unlock()
	}
	list := func(ctx context.Context, _ workflows.ListPendingShardsParams) (workflows.ListPendingShardsResult, error) {
		record(ctx, workflows.ListPendingShardsActivity)
		mu.Lock()
		defer mu.Unlock()
		if watermark >= gens {
			return workflows.ListPendingShardsResult{}, nil
		}
		return workflows.ListPendingShardsResult{Shards: []workflows.ShardPending{{Shard: shard, Pending: int(gens - watermark), Watermark: watermark}}}, nil
	}
	prepare := func(ctx context.Context, p workflows.PrepareParams) (workflows.PrepareResult, error) {
		record(ctx, workflows.PrepareActivity)
		mu.Lock()
		defer mu.Unlock()
		if watermark >= gens {
			return workflows.PrepareResult{}, nil
		}
		info := activity.GetInfo(ctx)
		g := watermark + 1 // one generation per pass
		return workflows.PrepareResult{Prepared: &store.PreparedMerge{
			Target: p.Target, Shard: p.Shard, Generations: []uint64{g}, Through: g,
			AttemptKey: info.WorkflowExecution.ID + "/" + info.ActivityID,
			Staged:     []store.StagedFile{{Path: "staged/" + info.ActivityID}},
		}}, nil
	}
	commit := func(ctx context.Context, p workflows.CommitParams) (workflows.CommitResult, error) {
		record(ctx, workflows.CommitActivity)
		mu.Lock()
		defer mu.Unlock()
		if watermark >= p.Prepared.Through {
			return workflows.CommitResult{BaseVersion: version, AlreadyCommitted: true}, nil
		}
		watermark = p.Prepared.Through
		version++
		return workflows.CommitResult{Reclaimed: len(p.Prepared.Generations), BaseVersion: version}, nil
	}
	abort := func(ctx context.Context, p workflows.AbortParams) (workflows.AbortResult, error) {
		record(ctx, workflows.AbortActivity)
		return workflows.AbortResult{}, nil
	}
	// The shared queue and the shard's own queue, as a worker owning the shard serves them.
	for _, q := range []string{workflows.TaskQueue, workflows.ShardQueue(shard)} {
		w := sdkworker.New(c, q, sdkworker.Options{})
		if q == workflows.TaskQueue {
			workflows.Register(w)
		}
		w.RegisterActivityWithOptions(list, activity.RegisterOptions{Name: workflows.ListPendingShardsActivity})
		w.RegisterActivityWithOptions(prepare, activity.RegisterOptions{Name: workflows.PrepareActivity})
		w.RegisterActivityWithOptions(commit, activity.RegisterOptions{Name: workflows.CommitActivity})
		w.RegisterActivityWithOptions(abort, activity.RegisterOptions{Name: workflows.AbortActivity})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := workflows.StartMergeWal(ctx, c, target, workflows.MergeWalInput{PassesPerRun: 1})
	require.NoError(t, err)
	var res workflows.MergeWalResult
	require.NoError(t, run.Get(ctx, &res)) // follows the continue-as-new chain
	require.Equal(t, gens, res.Reclaimed)
	require.GreaterOrEqual(t, res.Runs, gens, "one committed pass per run")

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	runs := map[string]bool{}
	for _, cl := range calls {
		require.False(t, seen[cl.activityID], "activity id %s used twice across runs", cl.activityID)
		seen[cl.activityID] = true
		parts := strings.Split(cl.activityID, "/")
		require.Len(t, parts, 3, cl.activityID)
		require.Equal(t, cl.runID, parts[1], "activity id %s: middle part is not the run ID of the run that scheduled it", cl.activityID)
		runs[cl.runID] = true
	}
	require.GreaterOrEqual(t, len(runs), gens, "prepares and commits came from %d runs: the merge did not continue as new", len(runs))
	t.Logf("%d activity calls over %d runs, e.g. %v", len(calls), len(runs), calls[len(calls)-1])
}
