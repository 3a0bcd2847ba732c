package integration

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/walkeeper/walkeeper/contract"
)

// A sweep leaves out a store whose MergeWal is already running: its start would only attach
// to the run, and a round with nothing else to start schedules no StartWorkflows activity.
// The running merge waits on the queue of an instance with no worker, so it is certainly open
// for both sweeps.
func TestSweepLeavesRunningMergesAlone(t *testing.T) {
	e := newEnv(t)
	const held = "generic:sweep-held"

	e.writeWithoutWorker("ghost-sweep", held, 3, 5)
	w := e.startWorker(e.config("sweep-w1"))
	a := newAPI(t, w.HTTPAddr())
	a.create("sweep-free")
	a.seal("sweep-free", 0, 3)

	merge := e.startMerge(held, contract.MergeWalInput{ScheduleToStartTimeout: 10 * time.Minute})
	t.Cleanup(func() { _ = e.c.TerminateWorkflow(e.ctx(waitShort), merge.GetID(), merge.GetRunID(), "test over") })
	waitFor(t, waitShort, "the held merge to be listed as running", func() (bool, error) {
		_, n, err := e.listExecutions("WorkflowId = '" + merge.GetID() + "' AND ExecutionStatus = 'Running'")
		return n == 1, err
	})

	in := contract.MaintenanceSweepInput{MergeMinGenerations: 3, MaxPendingAge: -1, CompactMinRuns: -1}
	res, _ := e.sweep("sweep-running-first", in)
	if len(res.Started) != 1 || res.Started[0].WorkflowID != "merge-wal/generic/sweep-free" {
		t.Fatalf("first sweep started %+v, want merge-wal/generic/sweep-free only (the held merge is running)", res.Started)
	}
	if res.Qualified != 2 {
		t.Fatalf("first sweep qualified %d stores, want 2 (both over the threshold)", res.Qualified)
	}
	e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), "merge-wal/generic/sweep-free", ""), waitLong)

	res, run := e.sweep("sweep-running-second", in)
	if len(res.Started) != 0 {
		t.Fatalf("second sweep started %+v, want nothing", res.Started)
	}
	for _, ev := range e.history(t, run.GetID(), run.GetRunID()) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.StartWorkflowsActivity {
			t.Fatalf("second sweep scheduled StartWorkflows (event %d) for a store whose merge is running", ev.GetEventId())
		}
	}
	if !e.isRunning(merge.GetID(), merge.GetRunID()) {
		t.Fatal("the held merge closed during the test")
	}
}
