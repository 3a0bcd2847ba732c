package integration

import (
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/walkeeper/walkeeper/contract"
)

// TestRouteStartsMergeEagerly: a merge started through a worker's HTTP route has its first
// workflow task handed to that worker in the start's answer (eager start), so it never queues
// on the shared task queue; a start that does not ask goes through matching as before. The
// server records an eager run's first task as started by the start's own identity (the
// worker's client), and a task that matching dispatched by the polling worker's identity.
func TestRouteStartsMergeEagerly(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(e.config("eager"))
	a := newAPI(t, w.HTTPAddr())
	for _, name := range []string{"eager-http", "eager-lazy"} {
		a.must(201, "POST", "/api/v1/stores/generic/"+name, genericSchemaJSON, nil)
		for g := range 2 {
			a.must(200, "POST", "/api/v1/stores/generic/"+name+"/rows", fmt.Sprintf(`[{"id":"r%d","v":%d,"note":"x"}]`, g, g), nil)
			a.must(200, "POST", "/api/v1/stores/generic/"+name+"/flush", nil, nil)
		}
	}
	a.must(200, "POST", "/api/v1/stores/generic/eager-http/merge-wal?wait=true", nil, nil)
	lazy := e.startMerge("generic:eager-lazy", contract.MergeWalInput{})
	if res := e.mergeResult(lazy, waitLong); res.Reclaimed != 2 {
		t.Fatalf("lazy merge reclaimed %d, want 2", res.Reclaimed)
	}

	for _, c := range []struct {
		target string
		eager  bool
	}{{"generic:eager-http", true}, {"generic:eager-lazy", false}} {
		started, first := e.firstTask(contract.MergeWalID(mustTarget(t, c.target)))
		by := first.GetWorkflowTaskStartedEventAttributes().GetIdentity()
		gap := first.GetEventTime().AsTime().Sub(started.GetEventTime().AsTime())
		t.Logf("%s: first workflow task started by %q %s after the run", c.target, by, gap)
		if eager := by == started.GetWorkflowExecutionStartedEventAttributes().GetIdentity(); eager != c.eager {
			t.Errorf("%s: first workflow task started by %q, the starter's identity %v, want %v", c.target, by, eager, c.eager)
		}
	}
}

// firstTask returns id's WorkflowExecutionStarted event and its first WorkflowTaskStarted.
func (e *env) firstTask(id string) (started, first *historypb.HistoryEvent) {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(e.ctx(waitShort), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && first == nil {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatalf("history of %s: %v", id, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = ev
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			first = ev
		}
	}
	if started == nil || first == nil {
		e.t.Fatalf("history of %s: no started run or first workflow task", id)
	}
	return started, first
}
