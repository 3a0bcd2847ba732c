package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// validStarter starts like the StartWorkflows activity: a request whose MergeWal input is out
// of bounds (contract.StartMergeWal refuses it) fails, the others are handed to starter.
func validStarter(starter *fakeStarter) func(context.Context, contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
	return func(ctx context.Context, p contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
		for _, r := range p.Starts {
			in := contract.MergeWalInput{Target: r.Target, Trigger: r.Trigger, TriggerReason: r.Reason}
			if err := in.Validate(); err != nil {
				return contract.StartWorkflowsResult{}, err
			}
		}
		return starter.start(ctx, p)
	}
}

// A window whose workflow ID is as long as Temporal allows (1,000 bytes) still starts its
// merges: the reason it gives each start names the window within the reason's bound.
func TestSweepWindowWithALongIDStartsItsMerges(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{1: true}}
	starter := &fakeStarter{}
	env := newEnv(t)
	id := "sweep-window/" + strings.Repeat("w", 1000-len("sweep-window/"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(f.scan)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(validStarter(starter))
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil)

	res := runWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 15 * time.Second})
	require.Equal(t, 1, res.Totals.Started, "%+v", res)
	require.Len(t, starter.requests, 1)
	reason := starter.requests[0].Reason
	require.LessOrEqual(t, len(reason), contract.MaxTriggerReasonBytes)
	require.True(t, strings.HasPrefix(reason, "12 pending >= 8; sweep window sweep-window/www"), reason)
	require.True(t, strings.HasSuffix(reason, " round 1"), reason)
}

// A window that started before the change names its ID in full, as before.
func TestSweepWindowWithALongIDOldPathNamesItInFull(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{1: true}}
	starter := &fakeStarter{}
	env := newEnv(t)
	id := strings.Repeat("w", 300)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.OnGetVersion(sweepReasonBoundedChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(f.scan)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil)

	env.ExecuteWorkflow(SweepWindow, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 15 * time.Second})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, starter.requests, 1)
	require.Equal(t, "12 pending >= 8; sweep window "+id+" round 1", starter.requests[0].Reason)
}

func TestReasonWindowID(t *testing.T) {
	require.Equal(t, "sweep-window/2026", reasonWindowID("sweep-window/2026"))
	require.Equal(t, "a?b", reasonWindowID("a\nb"))
	long := reasonWindowID(strings.Repeat("é", 1000))
	require.LessOrEqual(t, len(long), maxReasonWindowBytes+len("…"))
	require.True(t, strings.HasSuffix(long, "é…"), long)
}
