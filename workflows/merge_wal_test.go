package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
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
	env.OnActivity(PrepareActivity, anyCtx, anyArg).After(time.Second).Return(f.prepare)
	env.OnActivity(CommitActivity, anyCtx, anyArg).After(2 * time.Second).Return(f.commit)
	mockTable(env, f)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	require.Equal(t, 1, in.max[CommitActivity], "commits in flight at once")
	require.Equal(t, 1, in.max[PrepareActivity], "serial mode prepares one at a time")
	// Round 1, most indebted first: b (4), c (3), a (2, drained). Round 2 from a fresh
	// listing: b (2), c (1). The third listing finds nothing, so no prepare comes back empty.
	require.Equal(t, []string{"b", "c", "a", "b", "c"}, shardsOf(f.calls(&f.prepares)))
	require.Equal(t, []string{"b", "c", "a", "b", "c"}, shardsOf(f.calls(&f.commits)))
	for _, c := range f.calls(&f.prepares) {
		require.Equal(t, ShardQueue(c.shard), c.queue)
	}
	for _, c := range f.calls(&f.commits) {
		require.Equal(t, ShardQueue(c.shard), c.queue, "commit goes where the prepare ran")
	}
	require.Equal(t, 9, res.Reclaimed)
	require.Equal(t, 5, res.Passes)
	require.Equal(t, 1, res.Runs)
	require.Equal(t, uint64(5), res.BaseVersion)
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

// Histories recorded before fairRoundsChange keep their schedule: shards in id order, each
// until a prepare comes back empty.
func TestMergeWalSerialBeforeFairRoundsVisitsShardsInOrder(t *testing.T) {
	env := newEnv(t)
	env.OnGetVersion(fairRoundsChange, workflow.DefaultVersion, fairRoundsVersion).Return(workflow.DefaultVersion)
	f := newFakeTable("generic:gs", 2, map[string]int{"c": 3, "a": 2, "b": 4})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	require.Equal(t, []string{"a", "a", "b", "b", "b", "c", "c", "c"}, shardsOf(f.calls(&f.prepares)))
	require.Equal(t, []string{"a", "b", "b", "c", "c"}, shardsOf(f.calls(&f.commits)))
	require.Equal(t, 9, res.Reclaimed)
}

// A shard whose writer seals again every time a pass of it commits always has something
// pending. The old serial schedule merged it until MaxPasses before it reached any other
// shard of the table (docs/BENCHMARKS.md finding 1, the incident's starvation inside one
// target), and the old parallel schedule never came back to a shard that had drained once
// while the hot shard kept the run alive (every later trigger only attaches to that run).
// Rounds give every shard a pass per round and merge a drained shard again once it has
// sealed.
func TestMergeWalHotShardDoesNotStarveOthers(t *testing.T) {
	const maxPasses = 30
	run := func(t *testing.T, legacy, parallel bool) (MergeWalResult, []string) {
		env := newEnv(t)
		if legacy {
			env.OnGetVersion(fairRoundsChange, workflow.DefaultVersion, fairRoundsVersion).Return(workflow.DefaultVersion)
		}
		f := newFakeTable("generic:hot", 1, map[string]int{"a": 2, "b": 3, "c": 1})
		aCommits := 0
		env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(ctx context.Context, p CommitParams) (CommitResult, error) {
			res, err := f.commit(ctx, p)
			f.mu.Lock()
			if p.Prepared.Shard == "a" {
				f.pending["a"]++ // a's writer seals as fast as a pass completes
				if aCommits++; aCommits == 10 {
					f.pending["c"]++ // c, drained long ago, seals once more
				}
			}
			f.mu.Unlock()
			return res, err
		})
		mockTable(env, f)
		env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:hot", MaxPasses: maxPasses, PassesPerRun: 1000, ParallelPrepare: parallel})
		return mergeResult(t, env), shardsOf(f.calls(&f.commits))
	}
	firstAndLast := func(commits []string, shard string) (int, int) {
		first, last := -1, -1
		for i, s := range commits {
			if s == shard {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		return first, last
	}

	t.Run("serial before", func(t *testing.T) {
		_, commits := run(t, true, false)
		first, _ := firstAndLast(commits, "b")
		require.Equal(t, maxPasses, first, "b waits until a has used up MaxPasses: %v", commits)
	})
	t.Run("parallel before", func(t *testing.T) {
		res, _ := run(t, true, true)
		require.Equal(t, 1, shardResult(t, res, "c").Reclaimed, "c's second generation waits for the next MergeWal")
	})
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("rounds parallel=%v", parallel), func(t *testing.T) {
			res, commits := run(t, false, parallel)
			require.ElementsMatch(t, []string{"b", "a", "c"}, commits[:3], "round 1: one pass each")
			if !parallel {
				require.Equal(t, []string{"b", "a", "c"}, commits[:3], "most indebted first")
			}
			_, lastB := firstAndLast(commits, "b")
			require.Less(t, lastB, 9, "b is drained within three rounds: %v", commits)
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

// Within one run: IDs are distinct and carry the run ID. Across continue-as-new (where the
// testsuite cannot go: it gives every run the same run ID), see
// TestMergeWalActivityIDsAreUniqueAcrossRuns on a dev server.
func TestMergeWalActivityIDsEmbedTheRunID(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 3})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	mergeResult(t, env)

	seen := map[string]bool{}
	for _, c := range append(f.calls(&f.prepares), f.calls(&f.commits)...) {
		require.False(t, seen[c.activityID], "duplicate activity id %s", c.activityID)
		seen[c.activityID] = true
		// The run ID is part of the ID, so a continued or later run never reuses an
		// idempotency key of an earlier one.
		parts := strings.Split(c.activityID, "/")
		require.Len(t, parts, 3, c.activityID)
		require.NotEmpty(t, c.runID)
		require.Equal(t, c.runID, parts[1], c.activityID)
	}
}

func TestMergeWalParallelPrepareStillCommitsOneAtATime(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("rollout:r", 2, map[string]int{"s1": 4, "s2": 4, "s3": 4, "s4": 4})
	env.OnActivity(PrepareActivity, anyCtx, anyArg).After(5 * time.Second).Return(f.prepare)
	env.OnActivity(CommitActivity, anyCtx, anyArg).After(3 * time.Second).Return(f.commit)
	mockTable(env, f)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "rollout:r", ParallelPrepare: true, PrepareConcurrency: 3})
	res := mergeResult(t, env)

	require.Equal(t, 3, in.max[PrepareActivity], "prepares of different shards overlap, bounded by the semaphore")
	require.Equal(t, 1, in.max[CommitActivity], "commits in flight at once")
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
	env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(ctx context.Context, p CommitParams) (CommitResult, error) {
		f.mu.Lock()
		f.commits = append(f.commits, call{shard: p.Prepared.Shard, through: p.Prepared.Through})
		f.mu.Unlock()
		return CommitResult{}, temporal.NewNonRetryableApplicationError("watermark moved", ErrTypeStalePreparation, nil)
	}).Once()
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	prepares := f.calls(&f.prepares)
	aborts := f.calls(&f.aborts)
	require.Len(t, prepares, 2, "prepare, re-prepare after the abort; then the listing finds nothing pending")
	require.Len(t, aborts, 1)
	require.Equal(t, TaskQueue, aborts[0].queue, "clean-up runs on the shared queue")
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
	env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(context.Context, CommitParams) (CommitResult, error) {
		return CommitResult{}, temporal.NewNonRetryableApplicationError("watermark moved", ErrTypeStalePreparation, nil)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	typ, nonRetryable := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeAllShardsFailed, typ)
	require.True(t, nonRetryable)
	require.Len(t, f.calls(&f.aborts), maxStaleRestarts+1, "every stale preparation is aborted")
}

func TestMergeWalFailingShardDoesNotBlockOthers(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("datagen:d", 2, map[string]int{"a": 2, "b": 2, "c": 2})
	env.OnActivity(PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p PrepareParams) (PrepareResult, error) {
		if p.Shard == "b" {
			return PrepareResult{}, temporal.NewNonRetryableApplicationError("gen 1 does not decode", ErrTypeCorruptData, nil)
		}
		return f.prepare(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "datagen:d"})
	res := mergeResult(t, env)

	b := shardResult(t, res, "b")
	require.Equal(t, ErrTypeCorruptData, b.ErrorType)
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
	env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(ctx context.Context, p CommitParams) (CommitResult, error) {
		if p.Prepared.Shard == "a" {
			attempts++
			return CommitResult{}, temporal.NewApplicationError("lost every race", ErrTypeConflict)
		}
		return f.commit(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	require.Equal(t, 10, attempts, "a retryable commit error is retried per the retry policy")
	aborts := f.calls(&f.aborts)
	require.Len(t, aborts, 1)
	require.Equal(t, "a", aborts[0].shard)
	a := shardResult(t, res, "a")
	require.Equal(t, ErrTypeConflict, a.ErrorType)
	require.False(t, a.Permanent)
	require.Equal(t, 2, shardResult(t, res, "b").Reclaimed)
}

func TestMergeWalCommitFoundPresentByAbortCountsAsCommitted(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(ctx context.Context, p CommitParams) (CommitResult, error) {
		_, _ = f.commit(ctx, p) // published, but the reply is lost
		return CommitResult{}, temporal.NewNonRetryableApplicationError("boom after publish", "Internal", nil)
	}).Once()
	env.OnActivity(AbortActivity, anyCtx, anyArg).Return(AbortResult{CommitPresent: true}, nil).Once()
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	a := shardResult(t, res, "a")
	require.Empty(t, a.Error)
	require.Equal(t, 1, a.Passes)
	require.Equal(t, 2, a.Reclaimed)
}

func TestMergeWalAllShardsFailingPermanentlyFailsTheWorkflow(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2, "b": 2})
	env.OnActivity(PrepareActivity, anyCtx, anyArg).Return(func(context.Context, PrepareParams) (PrepareResult, error) {
		return PrepareResult{}, temporal.NewNonRetryableApplicationError("bad bytes", ErrTypeCorruptData, nil)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	typ, nonRetryable := appErrType(err)
	require.Equal(t, ErrTypeAllShardsFailed, typ)
	require.True(t, nonRetryable)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	var res MergeWalResult
	require.NoError(t, appErr.Details(&res), "the partial result travels with the failure")
	require.Len(t, res.Shards, 2)
}

func TestMergeWalFallsBackToSharedQueueWhenShardQueueTimesOut(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"gone": 2, "live": 1, "slow": 2})
	s2s := func() error { return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil) }
	env.OnActivity(PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p PrepareParams) (PrepareResult, error) {
		if activity.GetInfo(ctx).TaskQueue == ShardQueue("gone") {
			return PrepareResult{}, s2s() // nobody polls the owner's queue
		}
		return f.prepare(ctx, p)
	})
	env.OnActivity(CommitActivity, anyCtx, anyArg).Return(func(ctx context.Context, p CommitParams) (CommitResult, error) {
		q := activity.GetInfo(ctx).TaskQueue
		if q == ShardQueue("gone") {
			return CommitResult{}, fmt.Errorf("commit must not go to a queue that already timed out")
		}
		if q == ShardQueue("slow") {
			return CommitResult{}, s2s() // the owner went away between prepare and commit
		}
		return f.commit(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)

	var slowPrepares []string
	for _, c := range f.calls(&f.prepares) {
		switch c.shard {
		case "gone":
			require.Equal(t, TaskQueue, c.queue, "every prepare of gone runs on the shared queue")
		case "live":
			require.Equal(t, ShardQueue("live"), c.queue)
		case "slow":
			slowPrepares = append(slowPrepares, c.queue)
		}
	}
	// slow: prepared by its owner, then (after its first commit fell back) on the shared queue.
	require.Equal(t, []string{ShardQueue("slow"), TaskQueue}, slowPrepares)
	for _, c := range f.calls(&f.commits) {
		want := ShardQueue(c.shard)
		if c.shard == "gone" || c.shard == "slow" {
			want = TaskQueue
		}
		require.Equal(t, want, c.queue, "commit of %s", c.shard)
	}
	gone := shardResult(t, res, "gone")
	require.True(t, gone.SharedQueue)
	require.Equal(t, 2, gone.Reclaimed, "a shard whose owner is gone still gets merged")
	require.True(t, shardResult(t, res, "slow").SharedQueue)
	require.Equal(t, 2, shardResult(t, res, "slow").Reclaimed)
	require.False(t, shardResult(t, res, "live").SharedQueue)
}

func continueAsNewInput(t *testing.T, err error) MergeWalInput {
	t.Helper()
	var canErr *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &canErr), "want continue-as-new, got %v", err)
	require.Equal(t, MergeWalWorkflow, canErr.WorkflowType.Name)
	var next MergeWalInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(canErr.Input, &next))
	return next
}

func TestMergeWalContinuesAsNewWhenSuggested(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 6, "b": 2})
	mockTable(env, f)
	env.SetContinueAsNewSuggested(true)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs", MaxPasses: 50})
	require.True(t, env.IsWorkflowCompleted())
	next := continueAsNewInput(t, env.GetWorkflowError())

	require.Len(t, f.calls(&f.commits), 1, "hand over right after the first committed pass")
	require.Equal(t, "generic:gs", next.Target)
	require.Equal(t, 50, next.MaxPasses, "knobs are carried")
	require.NotNil(t, next.Carry)
	require.Equal(t, 1, next.Carry.Runs)
	require.Len(t, next.Carry.Shards, 2)
	a := next.Carry.Shards[0]
	require.Equal(t, "a", a.Shard)
	require.Equal(t, 1, a.Passes)
	require.Equal(t, 2, a.Reclaimed)
	require.Equal(t, 4, a.Pending)
	require.False(t, a.Finished)

	// The next run picks up where the first stopped and accumulates.
	env2 := newEnv(t)
	mockTable(env2, f)
	env2.ExecuteWorkflow(MergeWal, next)
	res := mergeResult(t, env2)
	require.Equal(t, 2, res.Runs)
	require.Equal(t, 6, shardResult(t, res, "a").Reclaimed)
	require.Equal(t, 3, shardResult(t, res, "a").Passes)
	require.Equal(t, 2, shardResult(t, res, "b").Reclaimed)
	require.Equal(t, 8, res.Reclaimed)
}

func TestMergeWalContinuesAsNewAfterPassesPerRun(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 5})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs", PassesPerRun: 2, ParallelPrepare: true})
	next := continueAsNewInput(t, env.GetWorkflowError())
	require.Len(t, f.calls(&f.commits), 2)
	require.Equal(t, 2, next.Carry.Shards[0].Passes)
}

func TestMergeWalStopsAtMaxPasses(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 5})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs", MaxPasses: 2})
	res := mergeResult(t, env)
	a := shardResult(t, res, "a")
	require.True(t, a.MaxPassesReached)
	require.Equal(t, 2, a.Passes)
	require.Equal(t, 3, a.Pending)
}

func TestMergeWalBadTargetFailsFastNonRetryable(t *testing.T) {
	for _, target := range []string{"", "nope", "bogus:x", "generic:", "generic:a/b", "generic:_registry"} {
		t.Run(target, func(t *testing.T) {
			env := newEnv(t)
			in := trackInflight(env)
			env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: target})
			require.True(t, env.IsWorkflowCompleted())
			typ, nonRetryable := appErrType(env.GetWorkflowError())
			require.Equal(t, ErrTypeInvalidInput, typ)
			require.True(t, nonRetryable)
			require.Empty(t, in.started, "no activity runs for a bad target")
		})
	}
}

func TestMergeWalNegativeKnobIsInvalidInput(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs", MaxPasses: -1})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeInvalidInput, typ)
}

func TestMergeWalListFailureFailsTheWorkflow(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ListPendingShardsActivity, anyCtx, anyArg).Return(
		ListPendingShardsResult{}, temporal.NewNonRetryableApplicationError("no such store", ErrTypeNotFound, nil))
	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:missing"})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeNotFound, typ)
}

func queryStatus(t *testing.T, env interface {
	QueryWorkflow(string, ...any) (converter.EncodedValue, error)
}) MergeWalStatus {
	t.Helper()
	v, err := env.QueryWorkflow(StatusQuery)
	require.NoError(t, err)
	var st MergeWalStatus
	require.NoError(t, v.Get(&st))
	return st
}

func TestMergeWalStatusQueryReportsProgressAndBlockedReasons(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 4})
	var prepareIDs []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == PrepareActivity {
			prepareIDs = append(prepareIDs, info.ActivityID)
		}
	})
	env.OnActivity(PrepareActivity, anyCtx, anyArg).After(time.Minute).Return(f.prepare).Once()
	mockTable(env, f)

	var seen []MergeWalStatus
	signal := func(state, errText string) {
		require.NotEmpty(t, prepareIDs)
		env.SignalWorkflow(ActivityStateSignal, ActivityState{ActivityID: prepareIDs[0], State: state, Attempt: 1, Error: errText})
	}
	at := func(d time.Duration, fn func()) { env.RegisterDelayedCallback(fn, d) }
	at(5*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(15*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(20*time.Second, func() { signal(ActivityStateRunning, "") })
	at(21*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(25*time.Second, func() { signal(ActivityStateWaitingBudget, "") })
	at(26*time.Second, func() { seen = append(seen, queryStatus(t, env)) })
	at(30*time.Second, func() { signal(ActivityStateRetrying, "budget busy") })
	at(31*time.Second, func() { seen = append(seen, queryStatus(t, env)) })

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 4, res.Reclaimed)

	require.Len(t, seen, 5)
	first := seen[0]
	require.Equal(t, "generic:gs", first.Target)
	require.Equal(t, PhaseMerging, first.Phase)
	require.Equal(t, "a", first.Shard)
	require.Equal(t, 1, first.Pass)
	require.Equal(t, 4, first.Pending)
	require.Empty(t, first.Blocked, "nothing is blocked before the watchdog fires")
	require.Len(t, first.Shards, 1)
	require.Equal(t, ShardPreparing, first.Shards[0].Phase)
	require.Equal(t, ShardQueue("a"), first.Shards[0].Queue)

	require.Contains(t, seen[1].Blocked, BlockedNoWorker, "unstarted past the threshold on the shard queue")
	require.Contains(t, seen[1].Shards[0].Blocked, BlockedNoWorker)
	require.Empty(t, seen[2].Blocked, "the activity said it runs")
	require.Contains(t, seen[3].Blocked, BlockedBudget)
	require.Contains(t, seen[4].Blocked, BlockedBackoff)
	require.Contains(t, seen[4].Blocked, "budget busy")
}

func TestMergeWalUpsertsSearchAttributes(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 4, "b": 1})
	mockTable(env, f)
	var pending []int64
	var targets []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if v, ok := sa.GetInt64(WalPending); ok {
			pending = append(pending, v)
		}
		if v, ok := sa.GetKeyword(WalTarget); ok {
			targets = append(targets, v)
		}
	}).Return(nil)

	env.ExecuteWorkflow(MergeWal, MergeWalInput{Target: "generic:gs"})
	mergeResult(t, env)
	require.Equal(t, []string{"generic:gs"}, targets, "a bare start gets its target attributes")
	// 5 listed; a's pass (3 left), b's pass (2), the second listing agrees, a's pass (0).
	require.Equal(t, []int64{5, 3, 2, 0}, pending)
}
