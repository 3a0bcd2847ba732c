package upgrade

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// The names build B's change leaves in a history (testdata/note-merge-plan.patch).
const (
	noteActivity = "NoteMergePlan"
	// versionMarker is the marker workflow.GetVersion records (the Go SDK's name for it), and
	// the change ID in its details (other changes of the tree have markers of their own).
	versionMarker = "Version"
	noteChange    = "note-merge-plan"
)

// changeID is the change ID a version marker's details name ("" when they name none).
func changeID(t *testing.T, details map[string]*commonpb.Payloads) string {
	t.Helper()
	var id string
	if p := details["change-id"].GetPayloads(); len(p) > 0 {
		if err := converter.GetDefaultDataConverter().FromPayload(p[0], &id); err != nil {
			t.Fatalf("version marker change ID: %v", err)
		}
	}
	return id
}

// run is what one workflow run's history says about the upgrade.
type run struct {
	id, runID string
	// startedOn and endedOn are the builds ("A", "B") of the workers that completed its first
	// and its last workflow task: the first completed task decides the run's path (a first
	// task that timed out on one worker is run afresh, not replayed, by the next).
	startedOn, endedOn string
	versionMarkers     int // of noteChange
	notesScheduled     int
	notesCompleted     int
	// noteRetried: the NoteMergePlan that completed was not its first attempt (an A worker,
	// which lacks the activity, failed it first).
	noteRetried  bool
	taskFailures []string
	// timeouts counts activity and workflow tasks that timed out: a task lost on its way to a
	// worker (one that was stopping, or under heavy load) runs again only after its heartbeat
	// timeout (a minute).
	timeouts      []string
	continuedAs   string // the next run of the chain, if it continued as new
	reclaimedDone int    // the chain's reclaimed total, on a completed run
	completed     bool
}

type histories struct {
	runs          []run
	startedA      int
	startedB      int
	crossed       int // started on A, ended on B
	noteRetried   int
	timeouts      map[string]int // "workflow task", or the activity type
	reclaimed     int
	chainsEndedOn map[string]int
}

// readHistories follows every chain from the run its start returned to its end, reading each
// run's history once (a start that joined a running chain shares its runs).
func readHistories(t *testing.T, c client.Client, f *fleet, chains []chainStart) histories {
	t.Helper()
	h := histories{chainsEndedOn: map[string]int{}, timeouts: map[string]int{}}
	seen := map[string]bool{}
	ended := map[string]bool{}
	for _, ch := range chains {
		for runID := ch.runID; runID != "" && !seen[runID]; {
			seen[runID] = true
			r := readRun(t, c, f, ch.id, runID)
			h.runs = append(h.runs, r)
			if r.completed && !ended[runID] {
				ended[runID] = true
				h.chainsEndedOn[r.endedOn]++
				h.reclaimed += r.reclaimedDone
			}
			runID = r.continuedAs
		}
	}
	for _, r := range h.runs {
		switch r.startedOn {
		case "A":
			h.startedA++
			if r.endedOn == "B" {
				h.crossed++
			}
		case "B":
			h.startedB++
		}
		if r.noteRetried {
			h.noteRetried++
		}
		for _, what := range r.timeouts {
			h.timeouts[what]++
		}
	}
	return h
}

// check asserts what a gated change promises across a rolling restart.
func (h histories) check(t *testing.T) {
	t.Helper()
	for _, r := range h.runs {
		for _, f := range r.taskFailures {
			t.Errorf("%s run %s (started on %s): workflow task failed: %s", r.id, r.runID, r.startedOn, f)
		}
		switch r.startedOn {
		case "A":
			if r.versionMarkers != 0 || r.notesScheduled != 0 {
				t.Errorf("%s run %s started on A but took B's path (version markers %d, %s scheduled %d) after moving to %s",
					r.id, r.runID, r.versionMarkers, noteActivity, r.notesScheduled, r.endedOn)
			}
		case "B":
			if r.versionMarkers != 1 || r.notesCompleted != 1 {
				t.Errorf("%s run %s started on B: version markers %d, %s completed %d; want 1 and 1",
					r.id, r.runID, r.versionMarkers, noteActivity, r.notesCompleted)
			}
		default:
			t.Errorf("%s run %s: first workflow task completed by an unknown worker", r.id, r.runID)
		}
	}
	if h.crossed == 0 {
		t.Errorf("no run started on A and ended on B: the upgrade did not land mid-run; make the workload larger")
	}
	if h.startedB == 0 {
		t.Errorf("no run started on B")
	}
}

// readRun reads one run's history.
func readRun(t *testing.T, c client.Client, f *fleet, id, runID string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := run{id: id, runID: runID}
	notes := map[int64]bool{}       // scheduled event IDs of NoteMergePlan
	scheduled := map[int64]string{} // scheduled event ID -> activity type
	events, err := actioncount.History(ctx, c, id, runID)
	if err != nil {
		t.Fatalf("history of %s/%s: %v", id, runID, err)
	}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			b := f.buildOf(ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity())
			if r.startedOn == "" {
				r.startedOn = b
			}
			r.endedOn = b
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			a := ev.GetWorkflowTaskFailedEventAttributes()
			r.taskFailures = append(r.taskFailures, fmt.Sprintf("%s by %s: %s", a.GetCause(), a.GetIdentity(), a.GetFailure().GetMessage()))
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if a := ev.GetMarkerRecordedEventAttributes(); a.GetMarkerName() == versionMarker && changeID(t, a.GetDetails()) == noteChange {
				r.versionMarkers++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			if scheduled[ev.GetEventId()] == noteActivity {
				notes[ev.GetEventId()] = true
				r.notesScheduled++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if notes[a.GetScheduledEventId()] && a.GetAttempt() > 1 {
				r.noteRetried = true
			}
			// A retried attempt's start carries the previous attempt's failure; a timed-out
			// attempt that was retried leaves no ActivityTaskTimedOut event.
			if a.GetLastFailure().GetTimeoutFailureInfo() != nil {
				r.timeouts = append(r.timeouts, scheduled[a.GetScheduledEventId()])
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if notes[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				r.notesCompleted++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			r.timeouts = append(r.timeouts, scheduled[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()])
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			r.timeouts = append(r.timeouts, "workflow task")
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			r.continuedAs = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			r.completed = true
		}
	}
	if r.completed {
		var res contract.MergeWalResult
		if err := c.GetWorkflow(ctx, id, runID).Get(ctx, &res); err != nil {
			t.Fatalf("result of %s/%s: %v", id, runID, err)
		}
		r.reclaimedDone = res.Reclaimed
	}
	return r
}

// buildOf maps a worker identity ("<pid>@<host>/<instance>") to the build its process ran.
func (f *fleet) buildOf(identity string) string {
	pid, _, ok := strings.Cut(identity, "@")
	if !ok {
		return ""
	}
	var n int
	if _, err := fmt.Sscanf(pid, "%d", &n); err != nil {
		return ""
	}
	return f.build[n]
}

// diagnose describes a chain that did not finish: its current run's pending activities and
// its history's event types (for the failure message).
func diagnose(c client.Client, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Sprintf("describe %s: %v", id, err)
	}
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	fmt.Fprintf(&b, "%s run %s: %s", id, runID, d.GetWorkflowExecutionInfo().GetStatus())
	for _, pa := range d.GetPendingActivities() {
		fmt.Fprintf(&b, "\n  pending %s %s attempt %d: %s", pa.GetActivityType().GetName(), pa.GetState(), pa.GetAttempt(), pa.GetLastFailure().GetMessage())
	}
	if wt := d.GetPendingWorkflowTask(); wt != nil {
		fmt.Fprintf(&b, "\n  pending workflow task %s attempt %d", wt.GetState(), wt.GetAttempt())
	}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			fmt.Fprintf(&b, "\n  history: %v", err)
			break
		}
		fmt.Fprintf(&b, "\n  %3d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format(time.RFC3339Nano), ev.GetEventType())
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			fmt.Fprintf(&b, " by %s", a.GetIdentity())
		}
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
			fmt.Fprintf(&b, " %s: %s", a.GetCause(), a.GetFailure().GetMessage())
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			fmt.Fprintf(&b, " %s on %s", a.GetActivityType().GetName(), a.GetTaskQueue().GetName())
		}
	}
	return b.String()
}
