package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// A MergeWal of a store with many shards, three in five failing with an error of the longest
// text a shard records, returns a result of bounded size: the totals of every shard and at
// most contract.MaxResultShards entries, the failed ones first.
func TestMergeWalResultOfManyShardsStaysBounded(t *testing.T) {
	env := newEnv(t)
	const shards = 70
	require.Greater(t, shards, contract.MaxRoundShards, "more shards than one round takes")
	require.Greater(t, shards/5*3, contract.MaxResultShards, "more failed shards than a result lists")
	pending := shardsEach("s%04d", shards, 1)
	f := newFakeTable("generic:wide", 1, pending)
	long := strings.Repeat("x", contract.MaxFailureTextBytes)
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		var i int
		_, _ = fmt.Sscanf(p.Shard, "s%d", &i)
		if i%5 < 3 {
			return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError(long, contract.ErrTypeCorruptData, nil)
		}
		return f.prepare(ctx, p)
	})
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:wide", ParallelPrepare: true,
		PrepareConcurrency: contract.MaxPrepareConcurrency, PassesPerWorkflowRun: contract.MaxPassesPerWorkflowRun})
	res := mergeResult(t, env)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	const bound = contract.MaxResultShards*(contract.MaxFailureTextBytes+512) + 1024
	require.Less(t, len(raw), bound, "the result of %d shards", shards)
	require.Equal(t, shards/5*2, res.Reclaimed, "the totals count every shard")
	require.Equal(t, shards/5*3, res.ShardsFailed)
	require.Len(t, res.Shards, contract.MaxResultShards)
	require.Equal(t, shards-contract.MaxResultShards, res.ShardsOmitted)
	require.Equal(t, "s0000", res.Shards[0].Shard)
	require.Equal(t, "s0005", res.Shards[3].Shard, "failed shards first, in shard order")
	require.NotEmpty(t, res.Shards[contract.MaxResultShards-1].Error)
}

// The bound holds at 2,000 shards: the result is built from the run's state, whatever the
// number of shards, at most contract.MaxResultShards entries.
func TestMergeWalResultOf2000ShardsStaysBounded(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: "generic", Name: "wide"}, tr: &tracker{}, resultCapped: true}
	long := strings.Repeat("x", contract.MaxFailureTextBytes)
	for i := range 2000 {
		sh := &shardRun{res: contract.ShardMergeResult{Shard: fmt.Sprintf("%036d", i), Reclaimed: 64, Passes: 1,
			BaseVersion: 1 << 40, Finished: true, BytesMerged: 1 << 30}}
		if i%2 == 0 {
			sh.res.Error, sh.res.ErrorType, sh.res.Permanent = long, contract.ErrTypeCorruptData, true
		}
		r.shards = append(r.shards, sh)
	}
	res := r.result()
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.Less(t, len(raw), contract.MaxResultShards*(contract.MaxFailureTextBytes+512)+1024)
	require.Equal(t, 2000*64, res.Reclaimed)
	require.Equal(t, 1000, res.ShardsFailed)
	require.Equal(t, 2000-contract.MaxResultShards, res.ShardsOmitted)
}

// A run that started before merge-result-capped lists every shard, as before.
func TestMergeWalResultOldPathListsEveryShard(t *testing.T) {
	env := newEnv(t)
	pending := shardsEach("s%02d", contract.MaxResultShards+8, 1)
	f := newFakeTable("generic:wide", 1, pending)
	mockTable(env, f)
	env.OnGetVersion(resultCappedChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:wide"})
	res := mergeResult(t, env)
	require.Len(t, res.Shards, contract.MaxResultShards+8)
	require.Zero(t, res.ShardsOmitted)
}

// The cap is the result's only: a continue-as-new carries every shard.
func TestMergeWalCarriesEveryShardPastTheResultCap(t *testing.T) {
	env := newEnv(t)
	pending := shardsEach("s%02d", contract.MaxResultShards+8, 2)
	f := newFakeTable("generic:wide", 1, pending)
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:wide", PassesPerWorkflowRun: contract.MaxResultShards + 8})
	next := continueAsNewInput(t, env.GetWorkflowError())
	require.Len(t, next.Carry.Shards, contract.MaxResultShards+8)
}

// TestFindingResultOfEscapedErrorsFitsItsPayload: a MergeWal result of MaxCarriedShards
// failed shards whose errors are of characters JSON escapes (an XML error body's '<', '>',
// '&', control bytes) stays under MaxPayloadBytes, where the 32 listed shards' 4 KiB of
// text each encoded to 24 KiB and the result to over 700 KiB.
func TestFindingResultOfEscapedErrorsFitsItsPayload(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: target.KindGeneric, Name: strings.Repeat("n", 128)}, tr: &tracker{}, resultCapped: true, resultErrorsCut: true, workflowRun: contract.MaxCarriedRuns, pendingAtStart: 1 << 62}
	escaped := contract.FailureText(strings.Repeat("<&>\x01", contract.MaxFailureTextBytes))
	for i := range contract.MaxCarriedShards {
		r.shards = append(r.shards, &shardRun{res: contract.ShardMergeResult{Shard: fmt.Sprintf("%064d", i), Reclaimed: 1 << 40,
			Passes: 1000, BaseVersion: 1 << 62, Restarts: 1 << 30, SharedQueue: true, Finished: true, MaxPassesReached: true,
			Error: escaped, ErrorType: contract.ErrTypeStalePreparation, Permanent: true, BytesMerged: 1 << 40}})
	}
	res := r.result()
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("result of %d failed shards with escaped errors: %d bytes", len(r.shards), len(raw))
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
	require.Len(t, res.Shards, contract.MaxResultShards)
	require.Equal(t, contract.MaxCarriedShards, res.ShardsFailed)
	require.NotEmpty(t, res.Shards[0].Error)
}
