package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/walkeeper/walkeeper/contract"
)

func TestCompactBaseLoopsUntilFewRunsLeft(t *testing.T) {
	env := newEnv(t)
	runs := 40
	var keys []string
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.CompactPassParams) (contract.CompactPassResult, error) {
		info := activity.GetInfo(ctx)
		keys = append(keys, info.ActivityID)
		require.Equal(t, contract.TaskQueue, info.TaskQueue)
		in := min(runs, 16)
		runs = runs - in + 1
		return contract.CompactPassResult{BaseVersion: uint64(100 + len(keys)), InputRuns: in, OutputRuns: 1,
			RowsIn: 10, RowsOut: 8, RunsLeft: runs, Committed: true}, nil
	})
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs", MaxRuns: 16})
	res := resultOf[contract.CompactBaseResult](t, env)
	// 40 -> 25 -> 10 -> 1
	require.Equal(t, 3, res.Passes)
	require.Equal(t, 3, res.Committed)
	require.Equal(t, 1, res.RunsLeft)
	require.Equal(t, uint64(103), res.BaseVersion)
	require.Equal(t, int64(30), res.RowsIn)
	require.Len(t, keys, 3)
	require.NotEqual(t, keys[0], keys[1])
}

func TestCompactBaseStopsAtMaxPasses(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(contract.CompactPassResult{InputRuns: 16, RunsLeft: 500, Committed: true}, nil)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs", MaxPasses: 2})
	res := resultOf[contract.CompactBaseResult](t, env)
	require.Equal(t, 2, res.Passes)
	require.Equal(t, 500, res.RunsLeft)
}

func TestCompactBaseGivesUpAfterIdlePasses(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(contract.CompactPassResult{InputRuns: 16, RunsLeft: 50}, nil)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs"})
	res := resultOf[contract.CompactBaseResult](t, env)
	require.Equal(t, compactMaxIdlePasses, res.Passes)
	require.Zero(t, res.Committed)
}

func TestCompactBaseNothingToDo(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(contract.CompactPassResult{RunsLeft: 1}, nil).Once()
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs"})
	res := resultOf[contract.CompactBaseResult](t, env)
	require.Equal(t, 1, res.Passes)
}

func TestCompactBaseStatusQuery(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).After(20*time.Second).
		Return(contract.CompactPassResult{InputRuns: 2, RunsLeft: 3, Committed: true}, nil)
	var seen []contract.CompactBaseStatus
	query := func() { seen = append(seen, queryAs[contract.CompactBaseStatus](t, env)) }
	env.RegisterDelayedCallback(query, 5*time.Second)
	env.RegisterDelayedCallback(query, 15*time.Second)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs"})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, seen, 2)
	require.Equal(t, "generic:gs", seen[0].Target)
	require.Equal(t, contract.PhaseCompacting, seen[0].Phase)
	require.Equal(t, 1, seen[0].Pass)
	require.Empty(t, seen[0].Blocked)
	// No watchdog: the pass in flight is listed, and the server's pending state says it
	// waits for a slot.
	require.Empty(t, seen[1].Blocked)
	require.Len(t, seen[1].InFlight, 1)
	a := seen[1].InFlight[0]
	require.Equal(t, contract.CompactBaseActivity, a.Activity)
	now := time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC)
	st := seen[1]
	st.ApplyPending([]*workflowpb.PendingActivityInfo{{
		ActivityId: a.ID, State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, Attempt: 1,
		ScheduledTime: timestamppb.New(now.Add(-15 * time.Second)),
	}}, now)
	require.Contains(t, st.Blocked, contract.BlockedSlot+" on "+contract.TaskQueue)
}

// An operator's Cancel of a compaction ends it Canceled while its pass runs (the pass's own
// clean-up is the store's: decision 0551), not Failed as a compaction that could not finish.
func TestCompactBaseCancelledDuringAPassEndsCanceled(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.CompactPassParams) (contract.CompactPassResult, error) {
		<-ctx.Done()
		return contract.CompactPassResult{}, ctx.Err()
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
}
