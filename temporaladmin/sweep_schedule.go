package temporaladmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// The sweep's schedule and workflow names (docs/DESIGN.md §4).
const (
	// SweepScheduleID is the Schedule that runs the sweep: one SweepWindow per window
	// (docs/DESIGN.md §12, "Sweep windows").
	SweepScheduleID = "walkeeper-sweep"
	// SweepWorkflowID is the workflow ID prefix of sweep windows (Temporal appends the
	// nominal start time to every scheduled workflow ID).
	SweepWorkflowID = "sweep-window"
	// DefaultSweepWindow is how long one SweepWindow runs rounds (SweepSchedule.Window).
	DefaultSweepWindow = contract.DefaultSweepWindow
)

// SweepSchedule configures the schedule walkeeper-sweep.
type SweepSchedule struct {
	// Every is the time between two sweep rounds.
	Every time.Duration
	// Window is how long one SweepWindow runs rounds, and the schedule's interval (0 =
	// DefaultSweepWindow). A window shorter than Every runs one round.
	Window time.Duration
	// Jitter bounds the random delay of each window's start (scheduleJitter of Window).
	Jitter time.Duration
	// Input is the sweep's input (thresholds, batching); zero fields take their defaults.
	Input contract.MaintenanceSweepInput
	// KeepInput keeps an existing schedule's readable sweep input, so that `walkeeper schedule
	// ensure`, which has no flags for it, does not reset what the workers configured.
	KeepInput bool
}

// EnsureSweepSchedule creates or reconciles the Schedule "walkeeper-sweep" that starts one
// SweepWindow per o.Window, sweeping every o.Every. Overlap BUFFER_ONE delays a window whose
// predecessor runs late instead of skipping a whole window; since interval specs align to the
// epoch, a window is started at once when none runs, unless the schedule is paused.
func EnsureSweepSchedule(ctx context.Context, c client.Client, o SweepSchedule) error {
	every, window := o.Every, cmp.Or(o.Window, DefaultSweepWindow)
	if every <= 0 {
		return fmt.Errorf("sweep schedule interval must be positive, got %s", every)
	}
	if window < 0 {
		return fmt.Errorf("sweep window must be positive, got %s", window)
	}
	action, err := sweepAction(o.Input, every, window)
	if err != nil {
		return err
	}
	var keep func(*client.ScheduleDescription) (*client.ScheduleWorkflowAction, error)
	if o.KeepInput {
		keep = func(d *client.ScheduleDescription) (*client.ScheduleWorkflowAction, error) {
			if in, ok := SweepWindowInputOf(d); ok {
				return sweepAction(in.Sweep, every, window)
			}
			return action, nil
		}
	}
	err = ensureSchedule(ctx, c, SweepScheduleID, window, scheduleJitter(window, o.Jitter), action, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, keep)
	if err != nil {
		return err
	}
	return startSweepWindowIfIdle(ctx, c)
}

// sweepAction is the schedule's action: a SweepWindow of window running rounds of sweep
// every interval; an input its windows would refuse is an error.
func sweepAction(sweep contract.MaintenanceSweepInput, every, window time.Duration) (*client.ScheduleWorkflowAction, error) {
	input := contract.SweepWindowInput{Sweep: sweep, Interval: every, Window: window}
	if err := input.Validate(); err != nil {
		return nil, fmt.Errorf("sweep schedule: every window would fail at once: %w", err)
	}
	return &client.ScheduleWorkflowAction{
		ID:        SweepWorkflowID,
		Workflow:  contract.SweepWindowWorkflow,
		Args:      []any{input},
		TaskQueue: contract.TaskQueue,
		Priority:  contract.SweepPriority, // ahead of the merges it starts on the same queue
		// Per run (a window continues as new within its event budget): the window, plus
		// room for a last round that lists slowly or paces many starts.
		WorkflowRunTimeout: window + 30*time.Minute,
		StaticSummary:      fmt.Sprintf("walkeeper sweep window: a round every %s for %s", every, window),
		StaticDetails: "Runs a sweep round every interval: lists the demand index of every kind and starts MergeWal / CompactBase " +
			"for the stores over a threshold. Rounds that start nothing leave only their listings here. The current details list " +
			"the last rounds that started something and why the rest was skipped; WalSweepStarts counts the window's starts.",
	}, nil
}

// startSweepWindowIfIdle triggers the sweep schedule when it is not paused and runs no window.
func startSweepWindowIfIdle(ctx context.Context, c client.Client) error {
	d, err := DescribeSchedule(ctx, c, SweepScheduleID)
	switch {
	case err != nil:
		return err
	case d.Schedule.State != nil && d.Schedule.State.Paused || len(d.Info.RunningWorkflows) > 0:
		return nil
	}
	if err := checkSweepAction(d); err != nil {
		return err
	}
	return TriggerSchedule(ctx, c, SweepScheduleID)
}

// ErrSweepScheduleForeign marks a sweep-now or a window start refused because walkeeper-sweep
// was edited to start another workflow type or queue: walkeeper runs only the action it ensured.
var ErrSweepScheduleForeign = errors.New("the sweep schedule starts something other than walkeeper's sweep")

// scheduleForeign is an ErrSweepScheduleForeign or an ErrTargetScheduleForeign (marker) that
// names what schedule id starts instead of want, and the command that restores its action.
type scheduleForeign struct {
	id, want, restore   string
	workflow, taskQueue string // clipped to contract.MaxStartErrorBytes, escaped
	// target, when set, is the target a target's schedule's MergeWalTick names instead of
	// wantTarget (escaped): the action is walkeeper's, its input is not.
	target, wantTarget string
	marker             error
}

func (e *scheduleForeign) Error() string {
	if e.target != "" {
		return fmt.Sprintf("schedule %s starts %s for target %s, not %s (edited outside walkeeper?): "+
			"not triggered; `%s` restores its action", e.id, e.want, e.target, e.wantTarget, e.restore)
	}
	return fmt.Sprintf("schedule %s starts workflow %s on task queue %s, not %s on %s (edited outside walkeeper?): "+
		"not triggered; `%s` restores its action", e.id, e.workflow, e.taskQueue, e.want, contract.TaskQueue, e.restore)
}

func (e *scheduleForeign) Is(target error) bool { return target == e.marker }

// checkSweepAction refuses, as an ErrSweepScheduleForeign, a description of walkeeper-sweep
// whose action does not start SweepWindow on walkeeper's task queue. Pure.
func checkSweepAction(d *client.ScheduleDescription) error {
	return checkAction(d, &scheduleForeign{id: SweepScheduleID, want: contract.SweepWindowWorkflow,
		restore: "walkeeper schedule ensure", marker: ErrSweepScheduleForeign})
}

// checkAction returns refused, naming what d's action starts, unless the action starts
// refused.want on walkeeper's task queue. Pure.
func checkAction(d *client.ScheduleDescription, refused *scheduleForeign) error {
	var name, queue string
	if a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); ok {
		name, _ = a.Workflow.(string) // a description names the type
		queue = a.TaskQueue
	}
	if name == refused.want && queue == contract.TaskQueue {
		return nil
	}
	refused.workflow, refused.taskQueue = foreignText(name), foreignText(queue)
	return refused
}

// foreignText is text anyone with namespace access set, clipped and escaped for one line.
func foreignText(s string) string {
	return cmp.Or(contract.Printable(contract.Clip(s, contract.MaxStartErrorBytes)), "(none)")
}

// SweepWindowInputOf decodes the input of d's action when it starts SweepWindow; one its
// window would refuse leaves the default thresholds.
func SweepWindowInputOf(d *client.ScheduleDescription) (contract.SweepWindowInput, bool) {
	var in contract.SweepWindowInput
	if !actionInput(d, contract.SweepWindowWorkflow, &in) || in.Validate() != nil {
		return contract.SweepWindowInput{}, false
	}
	return in, true
}

// runningSweepWindows lists the sweep windows the schedule is running.
func runningSweepWindows(ctx context.Context, c client.Client) ([]client.ScheduleWorkflowExecution, *client.ScheduleDescription, error) {
	d, err := DescribeSchedule(ctx, c, SweepScheduleID)
	if err != nil {
		return nil, nil, err
	}
	var windows []client.ScheduleWorkflowExecution
	for _, r := range d.Info.RunningWorkflows {
		if strings.HasPrefix(r.WorkflowID, SweepWorkflowID+"-") {
			windows = append(windows, r)
		}
	}
	return windows, d, nil
}

// SweepNow asks for a sweep round now and says how: a signal to the running window, else a
// trigger of the schedule, or, while it is paused with no window, one MaintenanceSweep. A
// workflow under a window's ID that is not the schedule's SweepWindow is not signaled, and
// nothing else is done: ErrSweepWindowForeign.
func SweepNow(ctx context.Context, c client.Client) (string, error) {
	windows, d, err := runningSweepWindows(ctx, c)
	if err != nil {
		return "", err
	}
	if err := checkSweepAction(d); err != nil {
		return "", err
	}
	for _, w := range windows {
		signaled, why, err := onSweepWindow(ctx, c, w, func(runID string) error {
			err := c.SignalWorkflow(ctx, w.WorkflowID, runID, contract.SweepNowSignal, nil)
			return wrapUnlessNotFound("signal", w.WorkflowID, err)
		})
		switch {
		case err != nil:
			return "", err
		case why != "":
			return "", &sweepWindowForeign{id: foreignText(w.WorkflowID), why: why, not: "signaled"}
		case signaled:
			return "signaled sweep window " + w.WorkflowID + " for a round now", nil
		}
		// A window that just closed falls through to the next, or to the trigger.
	}
	if d.Schedule.State != nil && d.Schedule.State.Paused {
		in, _ := SweepWindowInputOf(d)
		id := fmt.Sprintf("%s-now-%s", SweepWorkflowID, time.Now().UTC().Format(time.RFC3339))
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: contract.TaskQueue, WorkflowRunTimeout: 30 * time.Minute, Priority: contract.SweepPriority,
			StaticSummary: "walkeeper sweep now (schedule " + SweepScheduleID + " paused)",
		}, contract.MaintenanceSweepWorkflow, in.Sweep)
		if err != nil {
			return "", fmt.Errorf("start sweep %s: %w", id, err)
		}
		return "schedule " + SweepScheduleID + " is paused: started one MaintenanceSweep " + run.GetID(), nil
	}
	if err := trigger(ctx, c, SweepScheduleID, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE); err != nil {
		return "", err
	}
	return "no sweep window was running: schedule " + SweepScheduleID + " triggered, its window sweeps at once", nil
}

// ErrSweepWindowForeign marks a pause, delete or sweep-now of walkeeper-sweep that left alone a
// workflow under a window's ID that the schedule did not start (decisions 0901 and 0951).
var ErrSweepWindowForeign = errors.New("a workflow under a sweep window's ID is not the schedule's SweepWindow")

// sweepWindowForeign is an ErrSweepWindowForeign naming the first workflow left alone, why,
// what was not done to it (not: "canceled", "signaled") and how many more were.
type sweepWindowForeign struct {
	id, why, not string // id and why escaped
	more         int
}

func (e *sweepWindowForeign) Error() string {
	more := ""
	if e.more > 0 {
		more = fmt.Sprintf(" (and %d more)", e.more)
	}
	return fmt.Sprintf("workflow %s %s: not %s%s (started outside walkeeper?)", e.id, e.why, e.not, more)
}

func (e *sweepWindowForeign) Is(target error) bool { return target == ErrSweepWindowForeign }

// cancelSweepWindows requests the cancellation of the windows the schedule started (one
// already closed is fine); a workflow under a window's ID that is not one is left running,
// and named in an ErrSweepWindowForeign once the others are canceled.
func cancelSweepWindows(ctx context.Context, c client.Client, windows []client.ScheduleWorkflowExecution) error {
	var refused *sweepWindowForeign
	for _, w := range windows {
		_, why, err := onSweepWindow(ctx, c, w, func(runID string) error {
			return wrapUnlessNotFound("cancel", w.WorkflowID, c.CancelWorkflow(ctx, w.WorkflowID, runID))
		})
		switch {
		case err != nil:
			return err
		case why == "":
		case refused == nil:
			refused = &sweepWindowForeign{id: foreignText(w.WorkflowID), why: why, not: "canceled"}
		default:
			refused.more++
		}
	}
	if refused != nil {
		return refused
	}
	return nil
}

// onSweepWindow calls act with the run ID of the workflow running under window w's ID once a
// description shows it is the SweepWindow the schedule started, and otherwise says why not;
// done says act went through, and is false when no run was left under the ID to act on. act
// names the run described, so a workflow that took the ID meanwhile is not the one reached; a
// NotFound from act (the run closed) describes a window that continued as new again, up to
// three times.
func onSweepWindow(ctx context.Context, c client.Client, w client.ScheduleWorkflowExecution, act func(runID string) error) (done bool, why string, err error) {
	for attempt := 0; attempt < 3; attempt++ {
		d, err := c.DescribeWorkflowExecution(ctx, w.WorkflowID, "")
		if errors.As(err, new(*serviceerror.NotFound)) {
			return false, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("describe sweep window %s: %w", w.WorkflowID, err)
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return false, "", nil
		}
		if why := foreignWindow(w, info); why != "" {
			return false, why, nil
		}
		err = act(info.GetExecution().GetRunId())
		if !errors.As(err, new(*serviceerror.NotFound)) {
			return err == nil, "", err
		}
	}
	return false, "", nil
}

// wrapUnlessNotFound names op and window id in err, but leaves a NotFound (the run closed)
// as it is for onSweepWindow to describe the window again; nil stays nil.
func wrapUnlessNotFound(op, id string, err error) error {
	if err == nil || errors.As(err, new(*serviceerror.NotFound)) {
		return err
	}
	return fmt.Errorf("%s sweep window %s: %w", op, id, err)
}

// foreignWindow says why the running workflow info, under window w's ID, is not the
// SweepWindow the schedule started: "" when it is. Pure.
func foreignWindow(w client.ScheduleWorkflowExecution, info *workflowpb.WorkflowExecutionInfo) string {
	if typ := info.GetType().GetName(); typ != contract.SweepWindowWorkflow {
		return "is " + foreignText(typ) + ", not " + contract.SweepWindowWorkflow
	}
	// A server that does not report a chain's first run leaves the type as the only check.
	if first := info.GetFirstRunId(); first != "" && first != w.FirstExecutionRunID {
		return "is a " + contract.SweepWindowWorkflow + " the schedule did not start"
	}
	return ""
}
