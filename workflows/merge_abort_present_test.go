package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// mergeWithAbortFindingCommitted runs a one-shard MergeWal (2 generations in one pass) on the
// given abortCountsOwnPassChange version, whose commit publishes but fails and whose Abort
// answers ab, and returns the shard's result.
func mergeWithAbortFindingCommitted(t *testing.T, version workflow.Version, ab contract.AbortResult) contract.MergeWalResult {
	t.Helper()
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	env.OnGetVersion(abortCountsOwnPassChange, workflow.DefaultVersion, 1).Return(version)
	env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
		_, _ = f.commitRound(ctx, p) // the range is committed, by this run or another
		return contract.CommitRoundResult{}, temporal.NewNonRetryableApplicationError("boom after publish", "Internal", nil)
	}).Once()
	env.OnActivity(contract.AbortActivity, anyCtx, anyArg).Return(ab, nil).Once()
	mockTable(env, f)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	a := shardResult(t, res, "a")
	require.Empty(t, a.Error)
	require.True(t, a.Finished)
	require.Equal(t, 1, a.Passes, "the shard goes on past the pass either way")
	return res
}

// A pass whose Abort finds it committed by another attempt's run is that attempt's to report,
// so two runs racing on one pass count it once; the retry of a lost reply, whose own run
// published it, still counts it.
func TestFindingAbortFoundCommittedByAnotherRunIsNotCounted(t *testing.T) {
	res := mergeWithAbortFindingCommitted(t, 1, contract.AbortResult{CommitPresent: true, CommittedByAnother: true})
	require.Zero(t, res.Reclaimed, "another attempt's run holds the pass")
	require.Zero(t, shardResult(t, res, "a").Reclaimed)

	res = mergeWithAbortFindingCommitted(t, 1, contract.AbortResult{CommitPresent: true})
	require.Equal(t, 2, res.Reclaimed, "the lost reply's own run holds the pass")
	require.Equal(t, 2, shardResult(t, res, "a").Reclaimed)
}

// A run that started before the change keeps its count: it reports the pass whoever published
// it.
func TestAbortFoundCommittedByAnotherRunOldPathStillCounts(t *testing.T) {
	res := mergeWithAbortFindingCommitted(t, workflow.DefaultVersion, contract.AbortResult{CommitPresent: true, CommittedByAnother: true})
	require.Equal(t, 2, res.Reclaimed)
}
