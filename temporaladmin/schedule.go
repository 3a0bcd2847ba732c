package temporaladmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

const (
	// catchupWindow bounds how late a missed scheduled action may still start.
	catchupWindow = time.Minute

	// DefaultScheduleJitter is the default jitter of walkeeper's schedules (scheduleJitter).
	DefaultScheduleJitter = 5 * time.Second

	scheduleNote = "managed by walkeeper"

	// MinScheduleInterval is the shortest interval a schedule may have: Temporal refuses a
	// shorter one ("interval is too small").
	MinScheduleInterval = time.Second
)

// scheduleJitter is the jitter a schedule of interval every gets, so schedules created
// together do not fire on the same second: at most jitter and a quarter of the interval. Pure.
func scheduleJitter(every, jitter time.Duration) time.Duration {
	return max(0, min(jitter, every/4))
}

// ensureSchedule creates schedule id, or replaces an existing one's spec, action and policies
// leaving its paused state alone; update, when not nil, gives an existing one's action.
func ensureSchedule(ctx context.Context, c client.Client, id string, every, jitter time.Duration, action *client.ScheduleWorkflowAction,
	overlap enumspb.ScheduleOverlapPolicy, update func(*client.ScheduleDescription) (*client.ScheduleWorkflowAction, error)) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}, Jitter: jitter}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:            id,
		Spec:          spec,
		Action:        action,
		Overlap:       overlap,
		CatchupWindow: catchupWindow,
		Note:          scheduleNote,
	})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return scheduleError("create", id, err)
	}
	err = c.ScheduleClient().GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &spec
			s.Action = action
			if update != nil {
				a, err := update(&in.Description)
				if err != nil {
					return nil, err
				}
				s.Action = a
			}
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = overlap
			s.Policy.CatchupWindow = catchupWindow
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	return scheduleError("update", id, err)
}

// scheduleError is err of operation op on schedule id, naming both; nil stays nil.
func scheduleError(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s schedule %s: %w", op, id, err)
}

// PauseSchedule pauses schedule id with an operator note; pausing walkeeper-sweep also
// cancels its running window, so sweeps stop now, not at the window's end. A workflow under a
// window's ID that is not the schedule's SweepWindow is left running: ErrSweepWindowForeign.
func PauseSchedule(ctx context.Context, c client.Client, id, note string) error {
	err := c.ScheduleClient().GetHandle(ctx, id).Pause(ctx, client.SchedulePauseOptions{Note: cmp.Or(note, "paused with walkeeper")})
	if err != nil || id != SweepScheduleID {
		return scheduleError("pause", id, err)
	}
	windows, _, err := runningSweepWindows(ctx, c)
	if err != nil {
		return err
	}
	return doneBut("paused", id, cancelSweepWindows(ctx, c, windows))
}

// doneBut says that operation done on schedule id went through when err is a refusal to
// cancel or start a workflow that is not walkeeper's, lest the failed command be read as undone.
func doneBut(done, id string, err error) error {
	if errors.Is(err, ErrSweepWindowForeign) || errors.Is(err, ErrSweepScheduleForeign) {
		return fmt.Errorf("schedule %s %s: %w", id, done, err)
	}
	return err
}

// ResumeSchedule unpauses schedule id. Resuming walkeeper-sweep also starts a window now if
// none runs, so sweeps resume at once and not at the next whole window.
func ResumeSchedule(ctx context.Context, c client.Client, id, note string) error {
	err := c.ScheduleClient().GetHandle(ctx, id).Unpause(ctx, client.ScheduleUnpauseOptions{Note: cmp.Or(note, "resumed with walkeeper")})
	if err != nil || id != SweepScheduleID {
		return scheduleError("resume", id, err)
	}
	return doneBut("resumed", id, startSweepWindowIfIdle(ctx, c))
}

// TriggerSchedule runs schedule id's action now (even while paused). Overlap SKIP still
// applies: if the previous action is running, nothing new starts.
func TriggerSchedule(ctx context.Context, c client.Client, id string) error {
	return trigger(ctx, c, id, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP)
}

// ErrTargetScheduleForeign marks a trigger of a target's schedule refused because someone with
// namespace access edited it to start another workflow type than MergeWalTick, on another task
// queue, or for another target: walkeeper runs only the action it ensured (decisions 0901, 0951).
var ErrTargetScheduleForeign = errors.New("a target's merge schedule starts something other than MergeWalTick for its target")

// TriggerTargetSchedule runs t's schedule's action now, as TriggerSchedule does, once a
// description shows it starts MergeWalTick on walkeeper's task queue for t; any other action
// is an ErrTargetScheduleForeign naming it, and nothing is triggered.
func TriggerTargetSchedule(ctx context.Context, c client.Client, t target.Target) error {
	id := TargetScheduleID(t)
	d, err := DescribeSchedule(ctx, c, id)
	if err != nil {
		return err
	}
	refused := &scheduleForeign{id: id, want: contract.MergeWalTickWorkflow,
		restore: "walkeeper schedule ensure --target " + t.String(), marker: ErrTargetScheduleForeign}
	if err := checkAction(d, refused); err != nil {
		return err
	}
	if err := checkTickTarget(d, t, refused); err != nil {
		return err
	}
	return TriggerSchedule(ctx, c, id)
}

// checkTickTarget returns refused, naming the target d's MergeWalTick is for, unless its one
// argument is a valid input for t: the schedule's ID names t, but the tick merges the target
// its input names (and fails on an input it refuses). Pure.
func checkTickTarget(d *client.ScheduleDescription, t target.Target, refused *scheduleForeign) error {
	got := "(unreadable input)"
	var in contract.MergeWalTickInput
	if actionInput(d, contract.MergeWalTickWorkflow, &in) {
		switch {
		case in.Target == t.String() && in.Validate() == nil: // target.ParseTarget round-trips
			return nil
		case in.Target != "" && in.Target != t.String():
			got = foreignText(in.Target)
		}
	}
	refused.target, refused.wantTarget = got, t.String()
	return refused
}

// actionInput decodes into dst the one argument of d's action when it starts workflow,
// unchecked, and reports whether it did.
func actionInput(d *client.ScheduleDescription, workflow string, dst any) bool {
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok || a.Workflow != workflow || len(a.Args) != 1 {
		return false
	}
	p, ok := a.Args[0].(*commonpb.Payload)
	return ok && converter.GetDefaultDataConverter().FromPayload(p, dst) == nil
}

func trigger(ctx context.Context, c client.Client, id string, overlap enumspb.ScheduleOverlapPolicy) error {
	err := c.ScheduleClient().GetHandle(ctx, id).Trigger(ctx, client.ScheduleTriggerOptions{Overlap: overlap})
	return scheduleError("trigger", id, err)
}

// DescribeSchedule returns the schedule's spec, state and recent/next actions.
func DescribeSchedule(ctx context.Context, c client.Client, id string) (*client.ScheduleDescription, error) {
	d, err := c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	return d, scheduleError("describe", id, err)
}

// DeleteSchedule deletes schedule id; running workflows it started keep running, except
// walkeeper-sweep's window, which is canceled (it would go on sweeping until its end), if it
// is one: a workflow of another type under a window's ID is left running (ErrSweepWindowForeign).
func DeleteSchedule(ctx context.Context, c client.Client, id string) error {
	var windows []client.ScheduleWorkflowExecution
	if id == SweepScheduleID {
		var err error
		if windows, _, err = runningSweepWindows(ctx, c); err != nil {
			return err
		}
	}
	if err := scheduleError("delete", id, c.ScheduleClient().GetHandle(ctx, id).Delete(ctx)); err != nil {
		return err
	}
	return doneBut("deleted", id, cancelSweepWindows(ctx, c, windows))
}

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
