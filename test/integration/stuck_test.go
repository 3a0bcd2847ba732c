package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// brokenQueue serves a MergeWal that panics in its first workflow task, as a deploy of broken
// or non-deterministic workflow code would: every attempt of the task fails.
const brokenQueue = "walkeeper-broken-deploy"

const brokenPanic = "deliberately broken deploy"

// TestStuckMergeIsNoticedAndReplaced: a MergeWal whose workflow task fails on every attempt
// holds its store's merges (every trigger attaches to it). The real worker process's
// stuck-run scan notices it (walkeeper_merge_runs_stuck), `walkeeper status` says why, and
// the run is replaced after the deadline: a run started by hand without a run timeout is
// terminated by the scan, a run with one is timed out by Temporal. Each time the next trigger
// starts a fresh run, which merges the store to zero pending. Detection and replacement
// times are logged; they are bounded by the scan interval and the deadline, not asserted
// against wall time.
func TestStuckMergeIsNoticedAndReplaced(t *testing.T) {
	e := newEnv(t)
	const (
		// The server retries a failing workflow task a third time about 10 s after the first
		// attempt; the deadline leaves the scan 20 s more to see it before the run is replaced.
		deadline = 30 * time.Second
		interval = 2 * time.Second
		name     = "stuck"
	)
	tg := mustTarget(t, "generic:"+name)
	id := contract.MergeWalID(tg)

	// The broken deploy: an SDK worker of this test process on its own queue.
	bw := tworker.New(e.c, brokenQueue, tworker.Options{})
	bw.RegisterWorkflowWithOptions(func(workflow.Context, contract.MergeWalInput) (contract.MergeWalResult, error) {
		panic(brokenPanic)
	}, workflow.RegisterOptions{Name: contract.MergeWalWorkflow})
	if err := bw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bw.Stop)

	// The real worker process: the walkeeper binary, scanning every 2 s, deadline 30 s.
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	addr := e.workerProc(t, bin, "stuckw", ".worker", "--reconcile-interval", "0", "--merge-after-generations", "0",
		"--merge-run-timeout", deadline.String(), "--stuck-scan-interval", interval.String()).Listen
	a := newAPI(t, addr)
	a.create(name)
	a.create("idle") // listed before "stuck"
	// mergeAndWait is POST merge-wal?wait=true: its status and answer, or why there was none.
	// It reports rather than fails, so a goroutine can wait on a run beside the test.
	type waitAnswer struct {
		status int
		err    error
		Code   string                  `json:"code"`
		RunID  string                  `json:"run_id"`
		Result contract.MergeWalResult `json:"result"`
	}
	mergeAndWait := func() (ans waitAnswer) {
		resp, err := (&http.Client{Timeout: waitLong}).Post("http://"+addr+"/api/v1/stores/generic/"+name+"/merge-wal?wait=true", "application/json", nil)
		if err != nil {
			ans.err = err
			return ans
		}
		defer func() { _ = resp.Body.Close() }()
		ans.status, ans.err = resp.StatusCode, json.NewDecoder(resp.Body).Decode(&ans)
		return ans
	}

	next := 0 // the next generation's row id
	for _, sc := range []struct {
		name       string
		runTimeout time.Duration // 0: started by hand without one
		want       enumspb.WorkflowExecutionStatus
		waiterGets string // the code a caller waiting on the stuck run is answered
	}{
		{"started by hand without a run timeout", 0, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "merge_stopped"},
		{"started with the run timeout every walkeeper starter sets", deadline, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, "merge_timed_out"},
	} {
		t.Logf("--- %s", sc.name)
		a.seal(name, next, 3)
		next += 3
		terminatedBefore := metricValue(t, addr, "walkeeper_merge_runs_terminated_total", "workflow", "MergeWal")

		// The stuck run, as `temporal workflow start` (or a broken deploy) would start it.
		startedAt := time.Now()
		stuck, err := e.c.ExecuteWorkflow(e.ctx(waitShort), client.StartWorkflowOptions{ID: id, TaskQueue: brokenQueue,
			WorkflowRunTimeout: sc.runTimeout}, contract.MergeWalWorkflow, contract.MergeWalInput{Target: tg.String()})
		if err != nil {
			t.Fatal(err)
		}

		// It holds the store's merges: a trigger attaches to it, and a caller waiting on it
		// learns how it ended.
		var attached struct {
			RunID string `json:"run_id"`
		}
		if a.must(202, "POST", "/api/v1/stores/generic/"+name+"/merge-wal", nil, &attached); attached.RunID != stuck.GetRunID() {
			t.Fatalf("the HTTP trigger started run %s next to the stuck %s: want an attach", attached.RunID, stuck.GetRunID())
		}
		waited := make(chan waitAnswer, 1)
		go func() { waited <- mergeAndWait() }()

		// Detection: the worker process's gauge.
		waitFor(t, waitLong, "walkeeper_merge_runs_stuck to report the failing workflow task", func() (bool, error) {
			return metricValue(t, addr, "walkeeper_merge_runs_stuck", "reason", "workflow_task", "workflow", "MergeWal") == 1, nil
		})
		detected := time.Since(startedAt)
		t.Logf("detected %s after the stuck run started (scan every %s)", detected.Round(100*time.Millisecond), interval)

		// `walkeeper status` says why, with the workflow task's failure.
		if e.isRunning(id, stuck.GetRunID()) {
			out := runStatus(t, bin, e, deadline, tg.String())
			ends := "no run timeout: the workers' stuck-run scan terminates it " + deadline.String() + " after its start"
			if sc.runTimeout > 0 {
				ends = "Temporal ends it at its run timeout " + deadline.String()
			}
			// The cause is the one the history recorded: the streak's first attempt, which is
			// the deploy's panic unless a loaded server lost that task and timed it out.
			cause := recordedWorkflowTaskCause(t, e, id, stuck.GetRunID())
			for _, want := range []string{"stuck", "workflow task failing (attempt", cause, ends} {
				if strings.Contains(out, want) {
					continue
				}
				if !e.isRunning(id, stuck.GetRunID()) {
					// A loaded machine can let the run reach its deadline before status read it.
					t.Logf("the stuck run ended before walkeeper status read it; its answer is not checked:\n%s", out)
					break
				}
				t.Fatalf("walkeeper status does not say %q:\n%s", want, out)
			}
			switch cause {
			case brokenPanic:
			case workflowTaskTimedOut:
				t.Logf("the server timed out the streak's first workflow task, so the history holds no failure message to show")
			default:
				t.Fatalf("the stuck run's workflow task failed with %q, want the deploy's panic %q", cause, brokenPanic)
			}
			t.Logf("walkeeper status: %s", grepLine(out, "workflow task failing"))
			t.Logf("walkeeper status: %s", grepLine(out, "live status"))

			// Without a target, a page at a time: the store on the second page of one shows the
			// stuck run in its RUNNING column, and the running runs list it.
			first := runStatus(t, bin, e, deadline, "--limit", "1")
			second := runStatus(t, bin, e, deadline, "--limit", "1", "--after", "generic:idle")
			for _, want := range []string{"Stores (1):", "generic:idle", "more: run again with --after generic:idle for the next page"} {
				if !strings.Contains(first, want) {
					t.Fatalf("walkeeper status --limit 1 does not say %q:\n%s", want, first)
				}
			}
			if strings.Contains(second, "more:") || grepLine(second, "generic:idle ") != "" || grepLine(second, tg.String()+" ") == "" {
				t.Fatalf("walkeeper status --after generic:idle: want the last store only, and no next page:\n%s", second)
			}
			if !e.isRunning(id, stuck.GetRunID()) {
				t.Logf("the stuck run ended while walkeeper status ran; its RUNNING column is not checked")
			} else {
				if row := grepLine(second, tg.String()+" "); !strings.HasSuffix(row, " MergeWal") {
					t.Fatalf("walkeeper status: the stuck store's row %q does not end in its running MergeWal:\n%s", row, second)
				}
				if !strings.Contains(second, "Running workflows (1):") || !strings.Contains(grepLine(second, id+" "), stuck.GetRunID()) {
					t.Fatalf("walkeeper status: the running runs do not list %s %s:\n%s", id, stuck.GetRunID(), second)
				}
			}
		}

		// Replacement: the run is closed after the deadline, by the scan or by Temporal.
		waitFor(t, waitLong, "the stuck run to be ended", func() (bool, error) {
			d, err := e.describe(id, stuck.GetRunID())
			if err != nil {
				return false, err
			}
			return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
		})
		d, err := e.describe(id, stuck.GetRunID())
		if err != nil {
			t.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() != sc.want {
			t.Fatalf("stuck run closed as %s, want %s", info.GetStatus(), sc.want)
		}
		held := info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime())
		if held < deadline {
			t.Fatalf("the stuck run was ended after %s, before its deadline %s", held, deadline)
		}
		t.Logf("replaced: closed %s after its start (deadline %s)", held.Round(100*time.Millisecond), deadline)
		terminated := func() float64 {
			return metricValue(t, addr, "walkeeper_merge_runs_terminated_total", "workflow", "MergeWal")
		}
		if sc.runTimeout == 0 {
			// The server closes the run before the scan's terminate call returns and counts it.
			waitFor(t, waitShort, "walkeeper_merge_runs_terminated_total to count the terminate", func() (bool, error) {
				return terminated() == terminatedBefore+1, nil
			})
			reason := e.closeEvent(t, id, stuck.GetRunID()).GetWorkflowExecutionTerminatedEventAttributes().GetReason()
			if !strings.Contains(reason, "--merge-run-timeout") || !strings.Contains(reason, "workflow task failing") {
				t.Fatalf("terminate reason %q does not say why", reason)
			}
		} else if terminated() != terminatedBefore {
			t.Fatalf("the scan terminated a run Temporal times out itself")
		}

		// The caller that waited on the stuck run is told how it ended.
		ans := <-waited
		if ans.err != nil {
			t.Fatalf("waiting on the stuck run: %v", ans.err)
		}
		if ans.Code != sc.waiterGets || ans.RunID != stuck.GetRunID() {
			t.Fatalf("the caller waiting on the stuck run got %d %q for run %s, want %q for %s", ans.status, ans.Code, ans.RunID, sc.waiterGets, stuck.GetRunID())
		}
		t.Logf("the caller waiting on the stuck run got %d %s", ans.status, ans.Code)

		// The next trigger starts a fresh run, which merges the store to zero pending. It too
		// has the 30 s run timeout: when a loaded server loses one of its tasks, Temporal
		// retries the task after its timeout (a minute for an activity), the run times out
		// with its generations still pending, and the next trigger starts another.
		before, retried := a.pending(name), false
		for try := 1; ; try++ {
			if ans = mergeAndWait(); ans.err != nil {
				t.Fatalf("POST merge-wal?wait=true: %v", ans.err)
			}
			if ans.RunID == stuck.GetRunID() {
				t.Fatalf("the trigger attached to the closed stuck run %s", ans.RunID)
			}
			if ans.status == http.StatusGatewayTimeout && ans.Code == "merge_timed_out" && try < 3 {
				t.Logf("fresh run %s ran past its run timeout %s; its history:", ans.RunID, deadline)
				e.logHistory(id, ans.RunID)
				retried = true
				continue
			}
			if ans.status != http.StatusOK {
				t.Fatalf("POST merge-wal?wait=true: %d %q for run %s, want 200", ans.status, ans.Code, ans.RunID)
			}
			break
		}
		// A run that timed out may have committed some passes, so its successor reclaims the rest.
		if left := a.pending(name); left != 0 || ans.Result.Reclaimed > before || (!retried && ans.Result.Reclaimed != before) {
			t.Fatalf("fresh run %s: reclaimed %d of %d, %d pending left", ans.RunID, ans.Result.Reclaimed, before, left)
		}
		t.Logf("fresh run %s merged %d generations; %s from the stuck run's start to zero pending",
			ans.RunID, ans.Result.Reclaimed, time.Since(startedAt).Round(100*time.Millisecond))

		// The gauge clears once the run is gone.
		waitFor(t, waitLong, "walkeeper_merge_runs_stuck to clear", func() (bool, error) {
			return metricValue(t, addr, "walkeeper_merge_runs_stuck", "reason", "workflow_task", "workflow", "MergeWal") == 0, nil
		})
	}
}

// runStatus is the output of `walkeeper status args...` against the test's namespace, told
// the workers' deadline.
func runStatus(t *testing.T, bin string, e *env, deadline time.Duration, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, bin, append([]string{"status", "--storage", e.storage, "--temporal", e.hostPort, "--namespace", e.ns,
		"--merge-run-timeout", deadline.String()}, args...)...)
	if code != 0 {
		t.Fatalf("walkeeper status: exit %d\n%s%s", code, stdout, stderr)
	}
	return stdout + stderr
}

// grepLine is the first line of out that contains s.
func grepLine(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

const workflowTaskTimedOut = "workflow task timed out" // as the status says it

// recordedWorkflowTaskCause is what run's history recorded of its failing workflow tasks, as
// the status shows it: the failure's message, or "workflow task timed out". The server
// records only a streak's first attempt, so this stays the same while the streak lasts.
func recordedWorkflowTaskCause(t *testing.T, e *env, id, runID string) string {
	t.Helper()
	cause := ""
	for _, ev := range e.history(t, id, runID) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			cause = ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			cause = workflowTaskTimedOut
		}
	}
	if cause == "" {
		t.Fatalf("run %s records no failed or timed-out workflow task", runID)
	}
	return cause
}
