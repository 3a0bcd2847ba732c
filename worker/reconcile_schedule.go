package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// ReconcileScheduleID is the Schedule that runs ReconcileDemand (docs/DESIGN.md §12).
const ReconcileScheduleID = contract.ReconcileDemandScheduleID

// EnsureReconcileSchedule creates the Schedule "walkeeper-reconcile" that starts
// ReconcileDemand every `every` with a jitter of a tenth of it (so the reconciles of many
// namespaces or clusters do not start on the same second), or, if it exists, reconciles
// its spec, action and policies. Overlap SKIP: a reconcile still paging (across its
// continue-as-new runs) makes the next tick a no-op. A paused schedule stays paused.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("reconcile schedule interval must be positive, got %s", every)
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}, Jitter: every / 10}
	action := &client.ScheduleWorkflowAction{
		ID:        contract.ReconcileDemandWorkflowID,
		Workflow:  contract.ReconcileDemandWorkflow,
		Args:      []any{contract.ReconcileDemandInput{}},
		TaskQueue: contract.TaskQueue,
		// Per run: a run pages DefaultReconcilePagesPerRun pages, then continues as new.
		WorkflowRunTimeout: time.Hour,
		StaticSummary:      "walkeeper demand index reconcile",
	}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:            ReconcileScheduleID,
		Spec:          spec,
		Action:        action,
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: SweepCatchupWindow,
		Note:          scheduleNote,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", ReconcileScheduleID, err)
	}
	err = c.ScheduleClient().GetHandle(ctx, ReconcileScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &spec
			s.Action = action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			s.Policy.CatchupWindow = SweepCatchupWindow
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", ReconcileScheduleID, err)
	}
	return nil
}
