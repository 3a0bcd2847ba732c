package workflows

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// errTypeUnavailable is a retryable failure of the store's backend, for these tests.
const errTypeUnavailable = "Unavailable"

// A listing that keeps failing retryably is retried a bounded number of times as a local
// activity (localListOptions: 5 attempts), then the merge fails with the listing's own typed
// error.
func TestMergeWalLocalListRetriesBoundedThenFailsTyped(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		func(_ context.Context, _ contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
			calls++
			return contract.ListPendingShardsResult{}, temporal.NewApplicationError("bucket unavailable", errTypeUnavailable)
		})
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:flaky"})
	err := env.GetWorkflowError()
	require.Error(t, err)
	typ, _ := appErrType(err)
	require.Equal(t, errTypeUnavailable, typ, "%v", err)
	var actErr *temporal.ActivityError
	require.True(t, errors.As(err, &actErr), "the failure is the listing's activity error: %v", err)
	require.Equal(t, int(localListOptions().RetryPolicy.MaximumAttempts), calls)
}

// A relisting that fails (all its local attempts) does not fail the merge: the round goes on
// with the estimates, and a drained shard finds out with an empty prepare.
func TestMergeWalLocalRelistFailureGoesOnWithEstimates(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 4})
	lists := 0
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(
		func(ctx context.Context, p contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
			lists++
			if lists > 1 {
				return contract.ListPendingShardsResult{}, temporal.NewApplicationError("bucket unavailable", errTypeUnavailable)
			}
			return f.list(ctx, p)
		})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 4, res.Reclaimed, "%+v", res)
	require.Equal(t, 1+int(localListOptions().RetryPolicy.MaximumAttempts), lists, "the first listing, then one relisting's attempts")
}
