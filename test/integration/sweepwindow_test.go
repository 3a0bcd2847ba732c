package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/workflows"
)

// TestSweepWindowLeavesNoWorkflowPerIdleRound runs the sweep schedule as a worker ensures it
// (a round every 2 s, a window of 10 minutes) on the real dev server. Idle rounds, with a
// store whose debt stays below every threshold, add no workflow beyond the one window; a
// store that then crosses the count threshold gets its MergeWal started by the window, with
// the window and the round in its trigger reason, and visibility lists the window among
// those that started something. `walkeeper schedule trigger` (SweepNow) runs a round in the
// same window.
func TestSweepWindowLeavesNoWorkflowPerIdleRound(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("sweepwin")
	cfg.SweepInterval = 2 * time.Second
	cfg.SweepWindow = 10 * time.Minute
	cfg.SweepJitter = 0
	cfg.SweepMergeMinGenerations = 3 // the worker's knob reaches the schedule's sweep input
	w := e.startWorker(cfg)
	a := newAPI(t, w.HTTPAddr())
	a.create("quiet")
	a.seal("quiet", 0, 1) // in the demand index, below every threshold

	// The worker's ensure started a window at once.
	var window string
	waitFor(t, waitShort, "the sweep window to start", func() (bool, error) {
		d, err := temporaladmin.DescribeSchedule(e.ctx(waitShort), e.c, temporaladmin.SweepScheduleID)
		if err != nil || len(d.Info.RunningWorkflows) == 0 {
			return false, err
		}
		window = d.Info.RunningWorkflows[0].WorkflowID
		return true, nil
	})
	if !strings.HasPrefix(window, temporaladmin.SweepWorkflowID+"-") {
		t.Fatalf("running %q, want a %s-* window", window, temporaladmin.SweepWorkflowID)
	}

	// N idle rounds: the window's history grows by its timers, the namespace by nothing.
	const idleRounds = 6
	waitFor(t, waitLong, fmt.Sprintf("%d sweep rounds", idleRounds), func() (bool, error) {
		return e.countEvents(window, enumspb.EVENT_TYPE_TIMER_FIRED) >= idleRounds, nil
	})
	if _, n, err := e.listExecutions(""); err != nil || n != 1 {
		t.Fatalf("after %d idle rounds the namespace has %d workflows (err %v), want the one window", idleRounds, n, err)
	}
	// An upsert in idle rounds would be one visibility write per round.
	if n := e.countUpserts(window, "TemporalChangeVersion"); n != 0 {
		t.Fatalf("idle rounds upserted search attributes %d times", n)
	}

	// A store over the count threshold (3 pending): the window's next round starts its merge.
	a.create("hot")
	a.seal("hot", 0, 3)
	id := contract.MergeWalID(mustTarget(t, "generic:hot"))
	// The next slot's round starts it; a round waits out a task lost in delivery (its
	// heartbeat timeout and first retry), which a loaded server does lose.
	roundWait := cfg.SweepInterval + workflows.SweepRoundLostTaskDelay() + waitShort
	waitFor(t, roundWait, "the window to start MergeWal of generic:hot", func() (bool, error) {
		_, err := e.describe(id, "")
		if errors.As(err, new(*serviceerror.NotFound)) {
			return false, fmt.Errorf("not started; the window's %s", e.pendingActivities(window))
		}
		return err == nil, err
	})
	e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), id, ""), waitLong)
	desc, err := e.describe(id, "")
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	if err := converter.GetDefaultDataConverter().FromPayload(desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[contract.MemoTriggerReason], &reason); err != nil {
		t.Fatalf("trigger reason of %s: %v", id, err)
	}
	if !strings.HasPrefix(reason, "3 pending >= 3") || !strings.Contains(reason, "; sweep window "+window+" round ") {
		t.Fatalf("trigger reason %q does not link back to the window %s", reason, window)
	}
	// The sweep's count rode the start (free), not an upsert: the started event carries it.
	var started *historypb.HistoryEvent
	for _, ev := range e.history(t, id, "") {
		if started == nil && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
			started = ev
		}
	}
	var atStart int64
	if p := started.GetWorkflowExecutionStartedEventAttributes().GetSearchAttributes().GetIndexedFields()[contract.WalPendingName]; p == nil ||
		converter.GetDefaultDataConverter().FromPayload(p, &atStart) != nil || atStart != 3 {
		t.Fatalf("MergeWal started by the sweep carries WalPending %d at start (payload %v), want 3", atStart, p)
	}

	// Visibility lists the window among those that started something; the namespace holds
	// the window and the merge, nothing per round.
	q := fmt.Sprintf("WorkflowType=%q AND %s > 0", contract.SweepWindowWorkflow, contract.WalSweepStartsName)
	waitFor(t, waitShort, "visibility to list the window by "+contract.WalSweepStartsName, func() (bool, error) {
		_, n, err := e.listExecutions(q)
		return n == 1, err
	})
	if _, n, err := e.listExecutions(""); err != nil || n != 2 {
		t.Fatalf("the namespace has %d workflows (err %v), want the window and the merge", n, err)
	}

	// Sweep now: a signal, served by a round of the same window.
	before := e.countEvents(window, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
	msg, err := temporaladmin.SweepNow(e.ctx(waitShort), e.c)
	if err != nil || !strings.Contains(msg, window) {
		t.Fatalf("SweepNow: %q, %v", msg, err)
	}
	waitFor(t, roundWait, "the sweep-now round", func() (bool, error) {
		return e.countEvents(window, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) == 1 &&
			e.countEvents(window, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) > before, nil
	})
	if _, n, err := e.listExecutions(""); err != nil || n != 2 {
		t.Fatalf("after sweep now the namespace has %d workflows (err %v), want 2", n, err)
	}

	// Pausing the sweep ends the window now, as canceled.
	if err := temporaladmin.PauseSchedule(e.ctx(waitShort), e.c, temporaladmin.SweepScheduleID, "test done"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitShort, "the paused sweep's window to end", func() (bool, error) {
		d, err := e.describe(window, "")
		if err != nil {
			return false, err
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, nil
	})
}

// pendingActivities says id's pending activities: type, state, attempt, the last start and
// heartbeat, so a wait on a window round that timed out says what the round waited for.
func (e *env) pendingActivities(id string) string {
	d, err := e.describe(id, "")
	if err != nil {
		return fmt.Sprintf("pending activities: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d pending activities", len(d.GetPendingActivities()))
	for _, a := range d.GetPendingActivities() {
		fmt.Fprintf(&b, "; %s %s attempt %d started %s last heartbeat %s", a.GetActivityType().GetName(), a.GetState(), a.GetAttempt(),
			a.GetLastStartedTime().AsTime().Format(time.TimeOnly), a.GetLastHeartbeatTime().AsTime().Format(time.TimeOnly))
	}
	return b.String()
}

// countUpserts counts the search-attribute upserts in id's history that set anything but
// the attributes named in except.
func (e *env) countUpserts(id string, except ...string) int {
	n := 0
	for _, ev := range e.history(e.t, id, "") {
		if ev.GetEventType() != enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES {
			continue
		}
		for name := range ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
			if !slices.Contains(except, name) {
				n++
				break
			}
		}
	}
	return n
}

// countEvents counts the events of type typ in workflow id's current run.
func (e *env) countEvents(id string, typ enumspb.EventType) int {
	n := 0
	for _, ev := range e.history(e.t, id, "") {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}
