package worker

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// Why a running MergeWal or CompactBase run cannot make progress: the reason label of
// walkeeper_merge_runs_stuck, shared by the worker's stuck-run scan and `walkeeper status`.
const (
	// StuckWorkflowTask: its workflow task failed or timed out StuckWorkflowTaskAttempts
	// times in a row (a panic, a non-deterministic deploy); the run cannot take a step.
	StuckWorkflowTask = "workflow_task"
	// StuckActivity: an activity it waits on is at attempt StuckActivityAttempts or beyond,
	// which the retry policies of workflows/options.go only reach when a store or worker
	// keeps failing it.
	StuckActivity = "activity_retrying"
	// StuckPastDeadline: it runs longer than its run timeout allows, or, started without one,
	// longer than the deadline; the worker's scan terminates the latter.
	StuckPastDeadline = "past_deadline"
)

// StuckReasons lists the reasons in the order a run is classified.
var StuckReasons = []string{StuckWorkflowTask, StuckActivity, StuckPastDeadline}

const (
	// StuckWorkflowTaskAttempts: the server retries a failed workflow task at once and then
	// with backoff; a third attempt means the failure is not a one-off.
	StuckWorkflowTaskAttempts = 3
	// StuckActivityAttempts: the first retry of an activity is routine, the second is not.
	StuckActivityAttempts = 3
)

// StuckRun is why a running run cannot make progress (Reason "": it can, as the server shows).
type StuckRun struct {
	Reason string // one of StuckReasons, or ""
	// Detail says it for a human: "workflow task failing (attempt 7)", with the failure
	// DiagnoseRun read from the history.
	Detail string
	// PastDeadline: the run is older than its deadline (Deadline).
	PastDeadline bool
	// Deadline is the run's WorkflowRunTimeout, or the deadline the caller passed when the
	// run has none; OwnTimeout says which.
	Deadline   time.Duration
	OwnTimeout bool
	Age        time.Duration
}

// Terminable says that nothing but a terminate ends the run: it is past the deadline and
// has no run timeout of its own (started by hand), so Temporal will not end it.
func (s StuckRun) Terminable() bool { return s.PastDeadline && !s.OwnTimeout }

// classifyRun is why the described running run d cannot make progress at now. Pure.
func classifyRun(d *workflowservice.DescribeWorkflowExecutionResponse, now time.Time, deadline time.Duration) StuckRun {
	info := d.GetWorkflowExecutionInfo()
	s := StuckRun{Deadline: deadline, Age: now.Sub(info.GetStartTime().AsTime())}
	if rt := d.GetExecutionConfig().GetWorkflowRunTimeout(); rt != nil && rt.AsDuration() > 0 {
		s.Deadline, s.OwnTimeout = rt.AsDuration(), true
	}
	s.PastDeadline = s.Deadline > 0 && s.Age > s.Deadline
	if wt := d.GetPendingWorkflowTask(); wt != nil && wt.GetAttempt() >= StuckWorkflowTaskAttempts {
		s.Reason = StuckWorkflowTask
		s.Detail = fmt.Sprintf("workflow task failing (attempt %d)", wt.GetAttempt())
		return s
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetAttempt() >= StuckActivityAttempts {
			s.Reason = StuckActivity
			s.Detail = fmt.Sprintf("activity %s retrying (attempt %d", pa.GetActivityType().GetName(), pa.GetAttempt())
			if msg := pa.GetLastFailure().GetMessage(); msg != "" {
				s.Detail += ": " + contract.Clip(msg, 200)
			}
			s.Detail += ")"
			return s
		}
	}
	if s.PastDeadline {
		s.Reason = StuckPastDeadline
		s.Detail = fmt.Sprintf("running for %s, past its deadline %s", s.Age.Round(time.Second), s.Deadline)
	}
	return s
}

// DiagnoseRun is why the running run d cannot make progress at now (deadline bounds a run
// without a run timeout), with a failing workflow task's first failure read from its history.
func DiagnoseRun(ctx context.Context, c client.Client, namespace string, d *workflowservice.DescribeWorkflowExecutionResponse, now time.Time, deadline time.Duration) StuckRun {
	s := classifyRun(d, now, deadline)
	if s.Reason != StuckWorkflowTask {
		return s
	}
	resp, err := c.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace:       namespace,
		Execution:       d.GetWorkflowExecutionInfo().GetExecution(),
		MaximumPageSize: stuckHistoryEvents,
	})
	if err != nil {
		return s
	}
	for _, e := range resp.GetHistory().GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			if msg := e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage(); msg != "" {
				s.Detail += ": " + contract.Clip(msg, 300)
			}
			return s
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			s.Detail += ": workflow task timed out"
			return s
		}
	}
	return s
}

// stuckHistoryEvents bounds the newest events read for the last workflow task failure: it is
// followed by at most a few events (signals, a transient task) when a run is stuck.
const stuckHistoryEvents = 20
