package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Two starts → one run. A store whose only pending shard belongs to an instance with no
// worker keeps its MergeWal waiting on that shard's queue, so the run is certainly still
// open while the test starts it again through every path: contract.StartMergeWal (client,
// CLI, triggers) and the HTTP route, one after another and all at once. Every start must
// reach the same run; then the owner's queue gets a worker and the one run completes.
func TestTwoStartsOneRun(t *testing.T) {
	e := newEnv(t)
	const target = "generic:dedupe"

	// Pending generations owned by "ghost", an instance that is not running.
	keys := e.writeWithoutWorker("ghost", target, 3, 20)

	w := e.startWorker(e.config("w1"))
	a := newAPI(t, w.HTTPAddr())

	// The first start waits on ghost's queue far longer than this test needs.
	first := e.startMerge(target, contract.MergeWalInput{
		ScheduleToStartTimeout: 10 * time.Minute,
		SlotWaitThreshold:      time.Second,
	})
	if first.GetID() != "merge-wal/generic/dedupe" {
		t.Fatalf("workflow id %q", first.GetID())
	}
	waitFor(t, waitShort, "MergeWal to schedule Prepare on ghost's queue", func() (bool, error) {
		return e.pendingActivity(first.GetID(), first.GetRunID(), contract.PrepareActivity, false)
	})

	type started struct {
		WorkflowID string `json:"workflow_id"`
		RunID      string `json:"run_id"`
	}
	check := func(how, id, runID string) {
		t.Helper()
		if id != first.GetID() || runID != first.GetRunID() {
			t.Errorf("%s reached %s/%s, want the running %s/%s", how, id, runID, first.GetID(), first.GetRunID())
		}
	}

	// One after another.
	second := e.startMerge(target, contract.MergeWalInput{})
	check("second StartMergeWal", second.GetID(), second.GetRunID())
	for i := range 2 {
		var st started
		a.must(202, "POST", "/api/v1/stores/generic/dedupe/merge-wal", nil, &st)
		check(fmt.Sprintf("HTTP merge-wal #%d", i+1), st.WorkflowID, st.RunID)
	}

	// All at once, mixing both paths.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []started
	tg := mustTarget(t, target)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st started
			if i%2 == 0 {
				run, err := contract.StartMergeWal(e.ctx(waitShort), e.c, tg, contract.MergeWalInput{ParallelPrepare: true})
				if err != nil {
					t.Errorf("concurrent StartMergeWal: %v", err)
					return
				}
				st = started{run.GetID(), run.GetRunID()}
			} else if code := a.call("POST", "/api/v1/stores/generic/dedupe/merge-wal", nil, &st); code != 202 {
				t.Errorf("concurrent HTTP merge-wal: status %d", code)
				return
			}
			mu.Lock()
			got = append(got, st)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, st := range got {
		check(fmt.Sprintf("concurrent start #%d", i), st.WorkflowID, st.RunID)
	}
	if !e.isRunning(first.GetID(), first.GetRunID()) {
		t.Fatal("the first run closed while ghost's queue had no worker")
	}

	// While it waits, the status query says why and how much is pending, and visibility finds
	// the run by target. A start that knew no pending count (this one, by the CLI's
	// contract.StartMergeWal, or HTTP) carries no WalPending until the run's outcome sets it:
	// a live count would cost an upsert per listing (docs/decisions/0321-merge-pays-for-itself.md).
	waitFor(t, waitShort, "the status query to report the missing shard worker", func() (bool, error) {
		// The workflow lists its Prepare in flight; the server knows no worker started it.
		st, err := mergeWalStatus(e.ctx(waitShort), e.c, first.GetID(), first.GetRunID())
		if err != nil {
			return false, err
		}
		return strings.Contains(st.Blocked, contract.BlockedNoWorker) && st.Pending == 3, fmt.Errorf("status %+v", st)
	})
	idQuery := fmt.Sprintf("WorkflowId = '%s'", first.GetID())
	waitFor(t, waitShort, "visibility to find the running merge by target", func() (bool, error) {
		_, n, err := e.listExecutions(idQuery + " AND WalTarget = 'generic:dedupe' AND ExecutionStatus = 'Running'")
		return n == 1, err
	})

	// Give ghost's queue a worker: the one run completes.
	ghostAgain := e.openDB("ghost", nil)
	e.startHarness(harnessOptions{Shards: []*store.DB{ghostAgain}})
	res := e.mergeResult(first, waitLong)
	if res.Reclaimed != 3 || len(res.Shards) != 1 || res.Shards[0].Error != "" {
		t.Fatalf("result %+v, want 3 generations of one shard reclaimed", res)
	}
	st := e.stats(w.DB(), target)
	if st.TotalPending() != 0 || st.Rows != int64(len(keys)) {
		t.Fatalf("after merge: pending %d rows %d, want 0 and %d", st.TotalPending(), st.Rows, len(keys))
	}

	// Visibility lists exactly one execution for the workflow ID, with nothing pending.
	waitFor(t, waitShort, "visibility to list the completed run", func() (bool, error) {
		_, n, err := e.listExecutions(idQuery + " AND ExecutionStatus = 'Completed' AND WalPending = 0")
		return n >= 1, err
	})
	if _, n, err := e.listExecutions(idQuery); err != nil || n != 1 {
		t.Fatalf("visibility lists %d executions of %s (err %v), want 1", n, first.GetID(), err)
	}
}

// mergeWalStatus asks a running MergeWal for its status query and completes it with
// the server's pending activities (ApplyPending), as `walkeeper status` shows it. runID ""
// is the latest run.
func mergeWalStatus(ctx context.Context, c client.Client, workflowID, runID string) (contract.MergeWalStatus, error) {
	var st contract.MergeWalStatus
	v, err := c.QueryWorkflow(ctx, workflowID, runID, contract.StatusQuery)
	if err != nil {
		return st, err
	}
	if err := v.Get(&st); err != nil {
		return st, err
	}
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return st, err
	}
	st.ApplyPending(d.GetPendingActivities(), time.Now())
	return st, nil
}
