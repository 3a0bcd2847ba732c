package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// An operator's Cancel of a MaintenanceSweep ends the run Canceled: a listing cut short by
// the cancel is not a failed listing (SweepListFailed, which closes the run Failed), and a
// sweep cancelled while its starts ran does not record a success it did not finish.
func TestFindingMaintenanceSweepCancelEndsCanceled(t *testing.T) {
	t.Run("during a listing", func(t *testing.T) {
		env := newEnv(t)
		env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.ScanDemandParams) (contract.ScanDemandResult, error) {
			<-ctx.Done()
			return contract.ScanDemandResult{}, ctx.Err()
		})
		env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
		env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{})
		require.True(t, env.IsWorkflowCompleted())
		require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
	})
	t.Run("during the starts", func(t *testing.T) {
		env := newEnv(t)
		demand := map[string]contract.ScanDemandResult{
			"generic": {Targets: []contract.DemandTarget{{Target: "generic:hot", Pending: 80, MaxShardPending: 4, PendingShards: 20}}, StoresWithDebt: 1, Qualified: 1},
		}
		env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(demandFor(demand))
		env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
			<-ctx.Done()
			return contract.StartWorkflowsResult{}, ctx.Err()
		})
		recorded := false
		env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(func(context.Context, contract.RecordMaintenanceParams) error {
			recorded = true
			return nil
		})
		env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
		env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{})
		require.True(t, env.IsWorkflowCompleted())
		require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
		require.False(t, recorded, "a cancelled sweep records no success")
	})
}

// A MergeWalTick cancelled while its StartWorkflows runs ends Canceled: it holds nothing, and
// the merge it asked for, if started, goes on.
func TestMergeWalTickCancelEndsCanceled(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
		<-ctx.Done()
		return contract.StartWorkflowsResult{}, ctx.Err()
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic:demo"})
	require.True(t, env.IsWorkflowCompleted())
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
}
