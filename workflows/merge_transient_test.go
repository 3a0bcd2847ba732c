package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// A shard whose Prepare failed on a passing storage error was left out of its chain for good,
// while the store's other shards kept the chain running (a hot store: up to max_passes of
// theirs, hours) and every trigger attached to it: the failed shard's pending generations
// grew to --pending-max, with its writers and readers refused, until the chain ended. A
// continued run now merges again a shard whose failure could pass, once per run.
func TestFindingTransientShardFailureIsRetriedByTheNextRun(t *testing.T) {
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 8, "b": 4})
	outage := true
	prepare := func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		if p.Shard == "b" && outage {
			return contract.PrepareResult{}, temporal.NewApplicationError("storage stalled", contract.ErrTypeInternal)
		}
		return f.prepare(ctx, p)
	}

	env := newEnv(t)
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(prepare)
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", PassesPerWorkflowRun: 2})
	next := continueAsNewInput(t, env.GetWorkflowError())
	var b contract.ShardMergeResult
	for _, sh := range next.Carry.Shards {
		if sh.Shard == "b" {
			b = sh
		}
	}
	require.True(t, b.Finished, "the outage failed shard b in the first run: %+v", next.Carry.Shards)
	require.False(t, b.Permanent)
	require.Contains(t, b.Error, "storage stalled")

	outage = false // the storage is back
	env2 := newEnv(t)
	env2.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(prepare)
	mockTable(env2, f)
	env2.SetContinuedExecutionRunID("run-1")
	env2.ExecuteWorkflow(MergeWal, next)
	again := continueAsNewInput(t, env2.GetWorkflowError())
	for _, sh := range again.Carry.Shards {
		if sh.Shard == "b" {
			b = sh
		}
	}
	require.Empty(t, b.Error, "the continued run merges shard b again: %+v", again.Carry.Shards)
	require.Positive(t, b.Reclaimed)
}

// A permanent failure (a damaged object) stays the chain's verdict: retrying it each run would
// only repeat the failure.
func TestPermanentShardFailureStaysFailedInTheNextRun(t *testing.T) {
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 8, "b": 4})
	n := 0
	prepare := func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		if p.Shard == "b" {
			n++
			return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError("gen 1 does not decode", contract.ErrTypeCorruptData, nil)
		}
		return f.prepare(ctx, p)
	}
	env := newEnv(t)
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(prepare)
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", PassesPerWorkflowRun: 2})
	next := continueAsNewInput(t, env.GetWorkflowError())

	env2 := newEnv(t)
	env2.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(prepare)
	mockTable(env2, f)
	env2.SetContinuedExecutionRunID("run-1")
	env2.ExecuteWorkflow(MergeWal, next)
	again := continueAsNewInput(t, env2.GetWorkflowError())
	for _, sh := range again.Carry.Shards {
		if sh.Shard == "b" {
			require.True(t, sh.Permanent)
			require.Contains(t, sh.Error, "does not decode")
		}
	}
	require.Equal(t, 1, n, "shard b is prepared once in the whole chain")
}
