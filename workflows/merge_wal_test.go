package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

func shardsOf(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.shard
	}
	return out
}

func TestMergeWalSerialCommitsOneAtATimeInRounds(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"c": 3, "a": 2, "b": 4})
	mockTimedTable(env, f, time.Second, 2*time.Second)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	require.Equal(t, 1, in.max[contract.CommitRoundActivity], "commits in flight at once")
	require.Equal(t, 1, in.max[contract.PrepareActivity], "serial mode prepares one at a time")
	// Round 1, most indebted first: b (4), c (3), a (2, drained). Round 2 from a fresh
	// listing: b (2), c (1). The third listing finds nothing, so no prepare comes back empty.
	require.Equal(t, []string{"b", "c", "a", "b", "c"}, shardsOf(f.calls(&f.prepares)))
	require.Equal(t, []string{"b", "c", "a", "b", "c"}, shardsOf(f.calls(&f.commits)))
	for _, c := range f.calls(&f.prepares) {
		require.Equal(t, contract.ShardQueue(c.shard), c.queue)
	}
	for _, c := range f.calls(&f.commits) {
		require.Equal(t, contract.TaskQueue, c.queue, "a round commit runs on the shared queue")
	}
	require.Equal(t, 9, res.Reclaimed)
	require.Equal(t, 5, res.Passes)
	require.Equal(t, 1, res.WorkflowRuns)
	require.Equal(t, uint64(len(f.rounds)), res.BaseVersion, "one base version per round")
	for shard, want := range map[string]int{"a": 2, "b": 4, "c": 3} {
		sr := shardResult(t, res, shard)
		require.Equal(t, want, sr.Reclaimed, shard)
		require.True(t, sr.Finished, shard)
		require.Zero(t, sr.Pending, shard)
		require.Empty(t, sr.Error, shard)
	}
	// Result shards are in shard order.
	require.Equal(t, "a", res.Shards[0].Shard)
	require.Equal(t, "c", res.Shards[2].Shard)
}

// A shard whose writer seals again every time a pass of it commits always has something
// pending. Rounds give every shard a pass per round, so it cannot keep the table to itself
// (the starvation inside one target that the incident replay showed), and merge a
// drained shard again once it has sealed (every later trigger only attaches to this run).
func TestMergeWalHotShardDoesNotStarveOthers(t *testing.T) {
	const maxPasses = 30
	run := func(t *testing.T, parallel bool) (contract.MergeWalResult, []string) {
		env := newEnv(t)
		f := newFakeTable("generic:hot", 1, map[string]int{"a": 2, "b": 3, "c": 1})
		aCommits := 0
		env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
			res, err := f.commitRound(ctx, p)
			f.mu.Lock()
			if hasShard(p, "a") {
				f.pending["a"]++ // a's writer seals as fast as a pass completes
				if aCommits++; aCommits == 10 {
					f.pending["c"]++ // c, drained long ago, seals once more
				}
			}
			f.mu.Unlock()
			return res, err
		})
		mockTable(env, f)
		env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", MaxPasses: maxPasses, PassesPerWorkflowRun: 1000, ParallelPrepare: parallel})
		return mergeResult(t, env), shardsOf(f.calls(&f.commits))
	}
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("rounds parallel=%v", parallel), func(t *testing.T) {
			res, commits := run(t, parallel)
			require.ElementsMatch(t, []string{"b", "a", "c"}, commits[:3], "round 1: one pass each")
			if !parallel {
				require.Equal(t, []string{"b", "a", "c"}, commits[:3], "most indebted first")
			}
			require.NotContains(t, commits[9:], "b", "b is drained within three rounds: %v", commits)
			b := shardResult(t, res, "b")
			require.Equal(t, 3, b.Reclaimed)
			require.True(t, b.Finished)
			require.Zero(t, b.Pending)
			require.Equal(t, 2, shardResult(t, res, "c").Reclaimed, "a drained shard that seals again is merged again")
			a := shardResult(t, res, "a")
			require.True(t, a.MaxPassesReached, "a never drains; MaxPasses still bounds the merge")
			require.Equal(t, maxPasses, a.Reclaimed)
			require.Equal(t, maxPasses+3+2, len(commits))
		})
	}
}

// Within one run: IDs are distinct and name the activity and its sequence number. The
// middle part is the original run ID, which the testsuite leaves empty; across
// continue-as-new see TestMergeWalActivityIDsAreUniqueAcrossRuns on a dev server, and across
// a reset the replay of merge-wal-reset.json (TestReplay) and the suite in test/operator.
func TestMergeWalActivityIDsAreDistinctWithinARun(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 3})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	mergeResult(t, env)

	seen := map[string]bool{}
	calls := append(f.calls(&f.prepares), f.calls(&f.commits)...)
	require.NotEmpty(t, calls)
	for _, c := range calls {
		require.False(t, seen[c.activityID], "duplicate activity id %s", c.activityID)
		seen[c.activityID] = true
		parts := strings.Split(c.activityID, "/")
		require.Len(t, parts, 3, c.activityID)
		require.Contains(t, []string{contract.PrepareActivity, contract.CommitRoundActivity}, parts[0], c.activityID)
	}
}

func TestMergeWalParallelPrepareStillCommitsOneAtATime(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("rollout:r", 2, map[string]int{"s1": 4, "s2": 4, "s3": 4, "s4": 4})
	mockTimedTable(env, f, 5*time.Second, 3*time.Second)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "rollout:r", ParallelPrepare: true, PrepareConcurrency: 3})
	res := mergeResult(t, env)

	require.Equal(t, 3, in.max[contract.PrepareActivity], "prepares of different shards overlap, bounded by the semaphore")
	require.Equal(t, 1, in.max[contract.CommitRoundActivity], "commits in flight at once")
	require.Equal(t, 16, res.Reclaimed)
	require.Len(t, f.calls(&f.commits), 8)
	for _, sr := range res.Shards {
		require.Equal(t, 4, sr.Reclaimed)
		require.Equal(t, 2, sr.Passes)
	}
}

func TestMergeWalStalePreparationAbortsThenPreparesAgain(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	f.staleOnce = map[string]bool{"a": true}
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	prepares := f.calls(&f.prepares)
	aborts := f.calls(&f.aborts)
	require.Len(t, prepares, 2, "prepare, re-prepare after the abort; then the listing finds nothing pending")
	require.Len(t, aborts, 1)
	require.Equal(t, contract.TaskQueue, aborts[0].queue, "clean-up runs on the shared queue")
	require.Equal(t, uint64(2), aborts[0].through)
	require.Len(t, f.calls(&f.commits), 2)
	sr := shardResult(t, res, "a")
	require.Equal(t, 1, sr.Restarts)
	require.Equal(t, 2, sr.Reclaimed)
	require.Empty(t, sr.Error)
}

func TestMergeWalStaleForeverFailsShardPermanently(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).Return(func(_ context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
		var res contract.CommitRoundResult
		for _, pm := range p.Prepared {
			res.Shards = append(res.Shards, contract.RoundShardResult{Shard: pm.Shard, Outcome: contract.RoundStale, Reason: "watermark moved"})
		}
		return res, nil
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	requireNonRetryable(t, env, contract.ErrTypeAllShardsFailed)
	require.Len(t, f.calls(&f.aborts), maxStaleRestarts+1, "every stale preparation is aborted")
}

func TestMergeWalFailingShardDoesNotBlockOthers(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("datagen:d", 2, map[string]int{"a": 2, "b": 2, "c": 2})
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		if p.Shard == "b" {
			return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("gen 1 does not decode", contract.ErrTypeCorruptData, nil)
		}
		return f.prepare(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "datagen:d"})
	res := mergeResult(t, env)

	b := shardResult(t, res, "b")
	require.Equal(t, contract.ErrTypeCorruptData, b.ErrorType)
	require.True(t, b.Permanent)
	require.True(t, b.Finished)
	require.Contains(t, b.Error, "gen 1 does not decode")
	require.Equal(t, 2, shardResult(t, res, "a").Reclaimed)
	require.Equal(t, 2, shardResult(t, res, "c").Reclaimed, "the shard after the failing one still merges")
	require.Equal(t, 4, res.Reclaimed)
}

func TestMergeWalCommitFailureProvenAbsentIsAborted(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2, "b": 2})
	attempts := 0
	env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
		if hasShard(p, "a") {
			attempts++
			return contract.CommitRoundResult{}, temporal.NewApplicationError("lost every race", contract.ErrTypeConflict)
		}
		return f.commitRound(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	require.Equal(t, 10, attempts, "a retryable commit error is retried per the retry policy")
	aborts := f.calls(&f.aborts)
	require.Len(t, aborts, 1)
	require.Equal(t, "a", aborts[0].shard)
	a := shardResult(t, res, "a")
	require.Equal(t, contract.ErrTypeConflict, a.ErrorType)
	require.False(t, a.Permanent)
	require.Equal(t, 2, shardResult(t, res, "b").Reclaimed)
}

func TestMergeWalAllShardsFailingPermanentlyFailsTheWorkflow(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2, "b": 2})
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(func(context.Context, contract.PrepareParams) (contract.PrepareResult, error) {
		return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("bad bytes", contract.ErrTypeCorruptData, nil)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	appErr := requireNonRetryable(t, env, contract.ErrTypeAllShardsFailed)
	var res contract.MergeWalResult
	require.NoError(t, appErr.Details(&res), "the partial result travels with the failure")
	require.Len(t, res.Shards, 2)
}

func TestMergeWalFallsBackToSharedQueueWhenShardQueueTimesOut(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"gone": 2, "live": 1})
	s2s := func() error { return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil) }
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		if activity.GetInfo(ctx).TaskQueue == contract.ShardQueue("gone") {
			return contract.PrepareResult{}, s2s() // nobody polls the owner's queue
		}
		return f.prepare(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	for _, c := range f.calls(&f.prepares) {
		switch c.shard {
		case "gone":
			require.Equal(t, contract.TaskQueue, c.queue, "every prepare of gone runs on the shared queue")
		case "live":
			require.Equal(t, contract.ShardQueue("live"), c.queue)
		}
	}
	gone := shardResult(t, res, "gone")
	require.True(t, gone.SharedQueue)
	require.Equal(t, 2, gone.Reclaimed, "a shard whose owner is gone still gets merged")
	require.False(t, shardResult(t, res, "live").SharedQueue)
}

// continuedInput requires err to be a continue-as-new as workflow wf and returns the next
// run's input.
func continuedInput[In any](t *testing.T, err error, wf string) In {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, wf, can.WorkflowType.Name)
	var next In
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func continueAsNewInput(t *testing.T, err error) contract.MergeWalInput {
	t.Helper()
	return continuedInput[contract.MergeWalInput](t, err, contract.MergeWalWorkflow)
}

// billed counts what a run in env bills as the tracker counts it: its activities and listings
// started (no retries, no signals in these tests) and its search attribute upserts.
func billed(env *testsuite.TestWorkflowEnvironment) *int {
	n := new(int)
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { *n++ })
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { *n++ })
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(mock.Arguments) { *n++ }).Return(nil)
	return n
}

func TestMergeWalContinuesAsNewWhenSuggested(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 6, "b": 2})
	mockTable(env, f)
	env.SetContinueAsNewSuggested(true)
	first := billed(env)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", MaxPasses: 50})
	require.True(t, env.IsWorkflowCompleted())
	next := continueAsNewInput(t, env.GetWorkflowError())

	// The pass of b was prepared while a's committed; it commits before the hand-over.
	require.Equal(t, []string{"a", "b"}, shardsOf(f.calls(&f.commits)), "hand over once the passes in flight have committed")
	require.Equal(t, "generic:gs", next.Target)
	require.Equal(t, 50, next.MaxPasses, "knobs are carried")
	require.NotNil(t, next.Carry)
	require.Equal(t, 1, next.Carry.WorkflowRuns)
	require.Len(t, next.Carry.Shards, 2)
	a := next.Carry.Shards[0]
	require.Equal(t, "a", a.Shard)
	require.Equal(t, 1, a.Passes)
	require.Equal(t, 2, a.Reclaimed)
	require.Equal(t, 4, a.Pending)
	require.False(t, a.Finished)

	require.Equal(t, 1+*first, next.Carry.Actions, "the first run's start and what it billed")

	// The next run picks up where the first stopped and accumulates.
	env2 := newEnv(t)
	mockTable(env2, f)
	second := billed(env2)
	env2.SetContinuedExecutionRunID("run-1")
	env2.ExecuteWorkflow(MergeWal, next)
	res := mergeResult(t, env2)
	require.Equal(t, 2, res.WorkflowRuns)
	require.Equal(t, next.Carry.Actions+1+*second, res.Actions, "the chain's count: the carry's and the second run's")
	require.Equal(t, 6, shardResult(t, res, "a").Reclaimed)
	require.Equal(t, 3, shardResult(t, res, "a").Passes)
	require.Equal(t, 2, shardResult(t, res, "b").Reclaimed)
	require.Equal(t, 8, res.Reclaimed)
}

func TestMergeWalContinuesAsNewAfterPassesPerRun(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 5})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", PassesPerWorkflowRun: 2, ParallelPrepare: true})
	next := continueAsNewInput(t, env.GetWorkflowError())
	require.Len(t, f.calls(&f.commits), 2)
	require.Equal(t, 2, next.Carry.Shards[0].Passes)
}

// A shard's failure text is carried across continue-as-new, so the run that records it must
// keep it within the carry's bound: a longer activity error would fail the continued run as
// invalid input and end the chain.
func TestMergeWalCarriesALongShardErrorClipped(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 5, "b": 3})
	long := strings.Repeat("x", 70<<10)
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		if p.Shard == "a" {
			return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError(long, contract.ErrTypeCorruptData, nil)
		}
		return f.prepare(ctx, p)
	})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", PassesPerWorkflowRun: 1})
	next := continueAsNewInput(t, env.GetWorkflowError())
	require.NoError(t, next.Validate(), "the continued run accepts the carry its predecessor wrote")
	a := next.Carry.Shards[0]
	require.Equal(t, "a", a.Shard)
	require.True(t, strings.HasPrefix(a.Error, "prepare: xxx"), a.Error[:32])
	require.LessOrEqual(t, len(a.Error), contract.MaxFailureTextBytes)
	require.Equal(t, contract.ErrTypeCorruptData, a.ErrorType)

	env2 := newEnv(t)
	mockTable(env2, f)
	env2.SetContinuedExecutionRunID("run-1")
	env2.ExecuteWorkflow(MergeWal, next)
	again := continueAsNewInput(t, env2.GetWorkflowError())
	require.Equal(t, 2, again.Carry.WorkflowRuns, "the continued run merged and handed over in turn")
	require.Equal(t, a.Error, again.Carry.Shards[0].Error)
}

func TestMergeWalStopsAtMaxPasses(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 5})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", MaxPasses: 2})
	res := mergeResult(t, env)
	a := shardResult(t, res, "a")
	require.True(t, a.MaxPassesReached)
	require.Equal(t, 2, a.Passes)
	require.Equal(t, 3, a.Pending)
}

func TestMergeWalListFailureFailsTheWorkflow(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		contract.ListPendingShardsResult{}, temporal.NewNonRetryableApplicationError("no such store", contract.ErrTypeNotFound, nil))
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:missing"})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, contract.ErrTypeNotFound, typ)
}

// queryAs answers env's status query as S.
func queryAs[S any](t *testing.T, env *testsuite.TestWorkflowEnvironment) S {
	t.Helper()
	v, err := env.QueryWorkflow(contract.StatusQuery)
	require.NoError(t, err)
	var st S
	require.NoError(t, v.Get(&st))
	return st
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) contract.MergeWalStatus {
	t.Helper()
	return queryAs[contract.MergeWalStatus](t, env)
}

// slowPrepareEnv is a one-shard merge of generic:gs whose first Prepare takes a minute, its
// workflows' metrics going to h (nil: nowhere); the slice it returns collects the Prepare
// activity IDs as they start.
func slowPrepareEnv(t *testing.T, h client.MetricsHandler) (*testsuite.TestWorkflowEnvironment, *[]string) {
	env := newEnvWithMetrics(t, h)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 4})
	var prepareIDs []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == contract.PrepareActivity {
			prepareIDs = append(prepareIDs, info.ActivityID)
		}
	})
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).After(time.Minute).Return(f.prepare).Once()
	mockTable(env, f)
	return env, &prepareIDs
}

// A one-shard merge whose first Prepare takes a minute is asked its status at 5s (before the
// slot-wait threshold), 15s (past it), 21s (after a running notice), 26s (budget wait) and 31s
// (backoff).
func TestMergeWalStatusQueryReportsProgressAndBlockedReasons(t *testing.T) {
	env, prepareIDs := slowPrepareEnv(t, nil)

	var seen []contract.MergeWalStatus
	signal := func(state, errText string) {
		require.NotEmpty(t, *prepareIDs)
		env.SignalWorkflow(contract.ActivityStateSignal, contract.ActivityState{ActivityID: (*prepareIDs)[0], State: state, Attempt: 1, Error: errText})
	}
	at := func(d time.Duration, fn func()) { env.RegisterDelayedCallback(fn, d) }
	at(5*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(15*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(20*time.Second, func() { signal(contract.ActivityStateRunning, "") })
	at(21*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(25*time.Second, func() { signal(contract.ActivityStateWaitingBudget, "") })
	at(26*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(30*time.Second, func() { signal(contract.ActivityStateRetrying, "budget busy") })
	at(31*time.Second, func() { seen = append(seen, queryStatus(t, env)) })

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 4, res.Reclaimed)

	require.Len(t, seen, 5)
	first := seen[0]
	require.Equal(t, "generic:gs", first.Target)
	require.Equal(t, contract.PhaseMerging, first.Phase)
	require.Equal(t, "a", first.Shard)
	require.Equal(t, 1, first.Pass)
	require.Equal(t, 4, first.Pending)
	require.Empty(t, first.Blocked, "nothing is blocked before the slot-wait threshold")
	require.Len(t, first.Shards, 1)
	require.Equal(t, contract.ShardPreparing, first.Shards[0].Phase)
	require.Equal(t, contract.ShardQueue("a"), first.Shards[0].Queue)

	// No watchdog timer: the workflow alone cannot tell a slot wait from a run; it lists the
	// Prepare in flight, and the server's pending state (scheduled, not started) completes it.
	require.Empty(t, seen[1].Blocked)
	require.Len(t, seen[1].InFlight, 1)
	inFlight := seen[1].InFlight[0]
	require.Equal(t, contract.PrepareActivity, inFlight.Activity)
	require.Equal(t, "a", inFlight.Shard)
	require.Equal(t, contract.ShardQueue("a"), inFlight.Queue)
	require.Equal(t, contract.DefaultSlotWaitThreshold, seen[1].SlotWait)
	// withPending is seen[1] as the status command completes it from the server's pending
	// state of its Prepare, scheduled ago.
	withPending := func(state enumspb.PendingActivityState, ago time.Duration) contract.MergeWalStatus {
		now := time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC)
		st := seen[1]
		st.Shards = slices.Clone(seen[1].Shards)
		st.ApplyPending([]*workflowpb.PendingActivityInfo{{ActivityId: inFlight.ID, State: state, Attempt: 1, ScheduledTime: timestamppb.New(now.Add(-ago))}}, now)
		return st
	}
	waiting := withPending(enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, 15*time.Second)
	require.Contains(t, waiting.Blocked, contract.BlockedNoWorker, "unstarted past the threshold on the shard queue")
	require.Contains(t, waiting.Shards[0].Blocked, contract.BlockedNoWorker)
	require.Empty(t, withPending(enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, 5*time.Second).Blocked, "scheduled less than the threshold ago")
	require.Empty(t, withPending(enumspb.PENDING_ACTIVITY_STATE_STARTED, 15*time.Second).Blocked, "a worker picked it up")
	require.Empty(t, seen[2].Blocked, "the activity said it runs")
	require.Contains(t, seen[3].Blocked, contract.BlockedBudget)
	require.Contains(t, seen[4].Blocked, contract.BlockedBackoff)
	require.Contains(t, seen[4].Blocked, "budget busy")
}

// A run plans rounds from its estimates, but a shard that seals after the first
// listing is still merged before the run ends: a drained plan is confirmed by a listing.
func TestMergeWalRelistFindsShardSealedMidMerge(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	commits, lists, activityLists := 0, 0, 0
	// Listings are local activities: none may go through an activity task.
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		func(ctx context.Context, p contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
			if activity.GetInfo(ctx).IsLocalActivity {
				lists++
			} else {
				activityLists++
			}
			return f.list(ctx, p)
		})
	mockTable(env, f)
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == contract.CommitRoundActivity {
			if commits++; commits == 1 {
				f.mu.Lock()
				f.pending["b"] = 3
				f.mu.Unlock()
			}
		}
	})
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 5, res.Reclaimed, "%+v", res)
	// The first listing; the one that finds b once a's estimate is drained; the one that
	// confirms the drain after b's two passes (b's second pass ran on its estimate).
	require.Equal(t, 3, lists)
	require.Zero(t, activityLists, "a listing ran as an activity task, not as a local activity")
	require.Equal(t, 3, commits)
}

// A MergeWal started by hand for a missing store fails once, non-retryably, with the
// activity's one line as its own message (no activity-error wrapper around it).
func TestMergeWalMissingStoreFailsWithOneLine(t *testing.T) {
	env := newEnv(t)
	tgt, err := target.ParseTarget("generic:nope")
	require.NoError(t, err)
	line := contract.MissingStoreMessage(tgt, "")
	calls := 0
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		func(context.Context, contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
			calls++
			return contract.ListPendingShardsResult{}, temporal.NewNonRetryableApplicationError(line, contract.ErrTypeStoreNotFound, nil)
		})
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:nope"})
	err = env.GetWorkflowError()
	require.Error(t, err)
	appErr := requireNonRetryable(t, env, contract.ErrTypeStoreNotFound)
	require.Equal(t, line, appErr.Message())
	require.True(t, strings.HasPrefix(line, "store generic:nope does not exist; create it with: curl -XPOST "), line)
	var actErr *temporal.ActivityError
	require.False(t, errors.As(err, &actErr), "the failure is the line itself, not an activity error around it")
	require.Equal(t, 1, calls, "a missing store is not retried")
}

// A run whose writer seals as fast as it merges (every commit finds more sealed) lists again
// only relistInterval after its last listing, one timer each time, so its passes fold what the
// shard sealed meanwhile instead of a listing's and a pass's actions for each few generations.
// A run whose confirming listing finds nothing new never waits.
func TestMergeWalHotRunPacesItsListings(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 8, map[string]int{"a": 2})
	commits := 0
	var listedAt []time.Time
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		func(ctx context.Context, p contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
			listedAt = append(listedAt, env.Now())
			return f.list(ctx, p)
		})
	mockTable(env, f)
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == contract.CommitRoundActivity {
			if commits++; commits <= 3 {
				f.mu.Lock()
				f.pending["a"] += 2 // sealed while the pass committed
				f.mu.Unlock()
			}
		}
	})
	timers := 0
	env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 8, res.Reclaimed, "%+v", res)
	require.Len(t, listedAt, 5, "the first listing and one after each of the 4 passes")
	// The first confirming listing runs at once and finds a hot shard; every later one waits
	// for relistInterval after the one before, with a timer.
	require.Less(t, listedAt[1].Sub(listedAt[0]), relistInterval)
	for i := 2; i < len(listedAt); i++ {
		require.GreaterOrEqual(t, listedAt[i].Sub(listedAt[i-1]), relistInterval, "listing %d", i)
	}
	require.Equal(t, 3, timers)
	require.Equal(t, 1+4*2+len(listedAt)+timers+2, res.Actions, "start, 4 passes, listings, timers, 2 upserts (bare start, outcome)")
}

// An activity-state signal is typed by anyone with namespace access: the text of a retrying
// one is kept clipped while its activity is in flight, and the status says the same 200 bytes.
func TestTrackerKeepsASignalsErrorClipped(t *testing.T) {
	w := &watch{id: "Prepare/r/1"}
	tr := &tracker{inflight: []*watch{w}, onChange: func() {}}
	huge := strings.Repeat("e", 2<<20)
	tr.apply(contract.ActivityState{ActivityID: w.id, State: contract.ActivityStateRetrying, Attempt: 2, Error: huge})
	require.LessOrEqual(t, len(w.lastErr), contract.MaxFailureTextBytes+len("…"))
	require.Equal(t, contract.BackoffReason(2, huge), w.blocked())
}
