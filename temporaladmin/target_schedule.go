package temporaladmin

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// targetSchedulePrefix prefixes per-target merge schedules: "merge-wal-tick/<kind>/<name>".
const targetSchedulePrefix = "merge-wal-tick/"

// TargetScheduleID is the ID of target's own merge schedule: "merge-wal-tick/<kind>/<name>".
func TargetScheduleID(t target.Target) string { return targetSchedulePrefix + t.Path() }

// EnsureTargetSchedule creates or updates a Schedule that merges one target every `every`
// through MergeWalTick, since Temporal suffixes scheduled workflow IDs with a timestamp and the
// tick starts the real MergeWal ID; jitter bounds each tick's delay (scheduleJitter).
func EnsureTargetSchedule(ctx context.Context, c client.Client, t target.Target, every, jitter time.Duration) error {
	if every < MinScheduleInterval {
		return fmt.Errorf("schedule interval must be at least %s, got %s", MinScheduleInterval, every)
	}
	id := TargetScheduleID(t)
	action := &client.ScheduleWorkflowAction{
		ID:                 id,
		Workflow:           contract.MergeWalTickWorkflow,
		Args:               []any{map[string]any{"target": t.String()}},
		TaskQueue:          contract.TaskQueue,
		WorkflowRunTimeout: 10 * time.Minute,
		StaticSummary:      "merge tick for " + t.String(),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			contract.WalTarget.ValueSet(t.String()),
			contract.WalKind.ValueSet(string(t.Kind)),
		),
	}
	return ensureSchedule(ctx, c, id, every, scheduleJitter(every, jitter), action, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, nil)
}
