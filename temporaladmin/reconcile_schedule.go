package temporaladmin

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// ReconcileScheduleID is the Schedule that runs ReconcileDemand (docs/DESIGN.md §12), and the
// ID of the workflows it starts (Temporal appends the nominal start time).
const ReconcileScheduleID = "walkeeper-reconcile"

// EnsureReconcileSchedule creates or reconciles the Schedule "walkeeper-reconcile" that starts
// ReconcileDemand every `every`, with jitter up to a tenth of it so deployments sharing a
// storage do not start together, and overlap SKIP; a paused schedule stays paused.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, every time.Duration) error {
	if every < MinScheduleInterval {
		return fmt.Errorf("reconcile schedule interval must be at least %s, got %s", MinScheduleInterval, every)
	}
	action := &client.ScheduleWorkflowAction{
		ID:        ReconcileScheduleID,
		Workflow:  contract.ReconcileDemandWorkflow,
		Args:      []any{contract.ReconcileDemandInput{}},
		TaskQueue: contract.TaskQueue,
		// Per run: a run pages DefaultReconcilePagesPerRun pages, then continues as new.
		WorkflowRunTimeout: time.Hour,
		StaticSummary:      "walkeeper demand index reconcile",
	}
	return ensureSchedule(ctx, c, ReconcileScheduleID, every, scheduleJitter(every, every/10), action, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, nil)
}
