package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// abortOutcomes counts the Abort activities that completed and those the workflow cancelled.
type abortOutcomes struct{ completed, cancelled int }

// cancelDuringStaleAbort runs a one-shard merge at abortSurvivesCancelChange version v whose
// first preparation is stale and whose Abort is picked up a minute after it is scheduled; the
// Cancel comes meanwhile. The run must end cancelled.
func cancelDuringStaleAbort(t *testing.T, v workflow.Version) (*fakeTable, *abortOutcomes) {
	t.Helper()
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	f.staleOnce = map[string]bool{"a": true}
	env.OnGetVersion(abortSurvivesCancelChange, workflow.DefaultVersion, 1).Return(v)
	env.OnActivity(contract.AbortActivity, anyCtx, anyArg).After(time.Minute).Return(f.abort)
	mockTable(env, f)
	o := &abortOutcomes{}
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		if info.ActivityType.Name == contract.AbortActivity && err == nil {
			o.completed++
		}
	})
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		if info.ActivityType.Name == contract.AbortActivity {
			o.cancelled++
		}
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, 20*time.Second)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
	return f, o
}

// A Cancel that arrives while a stale preparation's Abort waits for a worker must not drop
// the Abort: it runs to the end, and the run then ends cancelled.
func TestMergeWalCancelDuringStaleAbortStillAborts(t *testing.T) {
	f, aborts := cancelDuringStaleAbort(t, 1)
	require.Zero(t, aborts.cancelled, "the Cancel cancelled the Abort")
	require.Equal(t, 1, aborts.completed)
	require.Len(t, f.calls(&f.aborts), 1)
	require.Len(t, f.calls(&f.prepares), 1, "a cancelled run prepares nothing more")
}

// A run that started before the change keeps its path: the Cancel cancels the queued Abort.
func TestMergeWalCancelDuringStaleAbortOldPathCancelsIt(t *testing.T) {
	_, aborts := cancelDuringStaleAbort(t, workflow.DefaultVersion)
	require.Equal(t, 1, aborts.cancelled)
	require.Zero(t, aborts.completed)
}

// The Abort a Cancel waits for is bounded by its retry policy: an Abort that keeps failing
// (its attempt is claimed for a commit that never finishes) ends the cancelled run once its
// attempts are spent, not never.
func TestMergeWalCancelWaitsForAnAbortOnlyUntilItsRetriesAreSpent(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 2})
	f.staleOnce = map[string]bool{"a": true}
	attempts := 0
	env.OnActivity(contract.AbortActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.AbortParams) (contract.AbortResult, error) {
		attempts++
		return contract.AbortResult{}, temporal.NewApplicationError("attempt has started committing", contract.ErrTypeConflict)
	})
	mockTable(env, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Second)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
	require.Equal(t, int(abortOptions("").RetryPolicy.MaximumAttempts), attempts, "the Abort was not retried to the end of its policy")
}
