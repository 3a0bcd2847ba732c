package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/promtext"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// TestEveryTriggerIsVisible drives one merge per trigger kind on the real dev server (the
// sweep by count and by age, HTTP, the walkeeper CLI, a per-target schedule, back-pressure,
// the count trigger, and a bare `temporal workflow start`), one store per trigger, each
// merge finished before the next starts so that a sweep only sees its own store. The HTTP
// and CLI answers carry the run and its result, the count trigger's worker counts its start,
// and the HTTP, CLI, count and bare merges drain their store. Then it finds every run through
// visibility by WalTarget, WalKind and WalTrigger (the queries the README gives) and checks
// that its search attributes and memo say why it ran, how far behind the store was and what
// it folded, that its activities are named by shard and pass, and that `walkeeper history`
// lists it with its trigger.
func TestEveryTriggerIsVisible(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(e.config("obs"))
	a := newAPI(t, w.HTTPAddr())
	wait := func(target string) contract.MergeWalResult {
		t.Helper()
		id := contract.MergeWalID(mustTarget(t, target))
		waitFor(t, waitShort, "MergeWal of "+target+" to start", func() (bool, error) {
			_, err := e.describe(id, "")
			return err == nil, nil
		})
		return e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), id, ""), waitLong)
	}
	sweep := func(name string, in contract.MaintenanceSweepInput) contract.MaintenanceSweepResult {
		t.Helper()
		in.CompactMinRuns = -1
		res, _ := e.sweep("obs-"+name, in)
		return res
	}
	want := map[string]string{} // target -> trigger

	// Sweep, by count: 3 pending >= 3 (age off).
	a.create("obs-sweepc")
	a.seal("obs-sweepc", 0, 3)
	if res := sweep("count", contract.MaintenanceSweepInput{MergeMinGenerations: 3, MaxPendingAge: -1}); len(res.Started) != 1 {
		t.Fatalf("sweep by count started %+v, want generic:obs-sweepc only", res.Started)
	}
	wait("generic:obs-sweepc")
	want["generic:obs-sweepc"] = contract.TriggerSweepCount

	// Sweep, by age: 1 pending, below the count threshold but older than 1ms.
	a.create("obs-sweepa")
	a.seal("obs-sweepa", 0, 1)
	time.Sleep(10 * time.Millisecond)
	if res := sweep("age", contract.MaintenanceSweepInput{MergeMinGenerations: 100, MaxPendingAge: time.Millisecond}); len(res.Started) != 1 {
		t.Fatalf("sweep by age started %+v, want generic:obs-sweepa only", res.Started)
	}
	wait("generic:obs-sweepa")
	want["generic:obs-sweepa"] = contract.TriggerSweepAge

	// HTTP: POST .../merge-wal?wait=true answers 200 with the run and its result.
	a.create("obs-http")
	a.seal("obs-http", 0, 2)
	var out struct {
		WorkflowID string                   `json:"workflow_id"`
		RunID      string                   `json:"run_id"`
		Result     *contract.MergeWalResult `json:"result"`
	}
	a.must(200, "POST", "/api/v1/stores/generic/obs-http/merge-wal?wait=true", nil, &out)
	if out.WorkflowID != "merge-wal/generic/obs-http" || out.RunID == "" || out.Result == nil || out.Result.Reclaimed != 2 || a.pending("obs-http") != 0 {
		t.Fatalf("merge-wal?wait=true answered %+v (result %+v), pending %d", out, out.Result, a.pending("obs-http"))
	}
	want["generic:obs-http"] = contract.TriggerHTTP

	// The walkeeper CLI: `walkeeper merge <target> --wait` prints the run and its result; a
	// malformed target is a usage error (exit status 2).
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	a.create("obs-cli")
	a.seal("obs-cli", 0, 2)
	stdout, stderr, code := runCLI(t, bin, "merge", "generic:obs-cli", "--wait", "--temporal", e.hostPort, "--namespace", e.ns)
	if code != 0 {
		t.Fatalf("walkeeper merge: exit %d\n%s\n%s", code, stdout, stderr)
	}
	_, js, _ := strings.Cut(stdout, "result:")
	var res contract.MergeWalResult
	if !strings.Contains(stdout, "merge-wal/generic/obs-cli") || json.Unmarshal([]byte(js), &res) != nil || res.Reclaimed != 2 || a.pending("obs-cli") != 0 {
		t.Fatalf("walkeeper merge printed %q (result %+v), pending %d; want its run and 2 reclaimed", stdout, res, a.pending("obs-cli"))
	}
	if rows := a.allRows("generic", "obs-cli"); len(rows) != 2 {
		t.Fatalf("read %d rows after the CLI's merge, want 2", len(rows))
	}
	if _, stderr, code := runCLI(t, bin, "merge", "nope:x", "--temporal", e.hostPort, "--namespace", e.ns); code != 2 {
		t.Fatalf("walkeeper merge nope:x: exit %d, want 2 (usage)\n%s", code, stderr)
	}
	want["generic:obs-cli"] = contract.TriggerCLI

	// A per-target schedule, fired now. Paused first: an hourly interval's ticks fall on the
	// hour, and one during the test would start a second run; a trigger runs a paused one.
	a.create("obs-sched")
	a.seal("obs-sched", 0, 2)
	sched := mustTarget(t, "generic:obs-sched")
	if err := temporaladmin.EnsureTargetSchedule(e.ctx(waitShort), e.c, sched, time.Hour, temporaladmin.DefaultScheduleJitter); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = temporaladmin.DeleteSchedule(e.ctx(waitShort), e.c, temporaladmin.TargetScheduleID(sched)) })
	if err := temporaladmin.PauseSchedule(e.ctx(waitShort), e.c, temporaladmin.TargetScheduleID(sched), "one run per test"); err != nil {
		t.Fatal(err)
	}
	if err := temporaladmin.TriggerSchedule(e.ctx(waitShort), e.c, temporaladmin.TargetScheduleID(sched)); err != nil {
		t.Fatal(err)
	}
	wait("generic:obs-sched")
	want["generic:obs-sched"] = contract.TriggerSchedule

	// Back-pressure: a worker that refuses appends to its shard at 2 pending starts the merge.
	bpCfg := e.config("obs-bp")
	bpCfg.PendingMax = 2
	bpCfg.PendingWarn = 1
	bp := newAPI(t, e.startWorker(bpCfg).HTTPAddr())
	bp.create("obs-bp")
	bp.seal("obs-bp", 0, 2)
	if code := bp.call("POST", "/api/v1/stores/generic/obs-bp/rows", `[{"id":"refused","v":0}]`, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("append at pending-max answered %d, want 503", code)
	}
	wait("generic:obs-bp")
	want["generic:obs-bp"] = contract.TriggerBackPressure

	// The count trigger: a worker whose seals take its own shard to 2 pending starts the merge
	// by itself, and counts it among its trigger starts (never asked for one over HTTP).
	cntCfg := e.config("obs-cnt")
	cntCfg.MergeAfterGenerations = 2
	cw := e.startWorker(cntCfg)
	cnt := newAPI(t, cw.HTTPAddr())
	cnt.create("obs-count")
	cnt.seal("obs-count", 0, 2)
	if res := wait("generic:obs-count"); res.Reclaimed < 2 || cnt.pending("obs-count") != 0 {
		t.Fatalf("the count trigger's merge: %+v, pending %d", res, cnt.pending("obs-count"))
	}
	if n, h := triggerStarts(t, cw, worker.TriggerCount, worker.ResultStarted), triggerStarts(t, cw, worker.TriggerHTTP, worker.ResultStarted); n < 1 || h != 0 {
		t.Errorf("the count trigger's worker counts %v count-trigger and %v HTTP starts, want at least 1 and none", n, h)
	}
	want["generic:obs-count"] = contract.TriggerCount

	// A bare `temporal workflow start` (docs/DESIGN.md §4, no search attributes given), as a
	// user might from the Temporal CLI or Web: the run merges and sets WalTarget and WalKind
	// itself, so visibility finds it by target below.
	a.create("obs-bare")
	a.seal("obs-bare", 0, 1)
	if stdout, stderr, code := runCLI(t, suite.CLIPath(), "workflow", "start", "--address", e.hostPort, "--namespace", e.ns,
		"--type", "MergeWal", "--task-queue", contract.TaskQueue, "--workflow-id", "merge-wal/generic/obs-bare",
		"--input", `{"target":"generic:obs-bare"}`); code != 0 {
		t.Fatalf("temporal workflow start: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if res := wait("generic:obs-bare"); res.Reclaimed != 1 || a.pending("obs-bare") != 0 {
		t.Fatalf("merge started by the Temporal CLI: %+v, pending %d", res, a.pending("obs-bare"))
	}
	want["generic:obs-bare"] = contract.TriggerUnknown

	dc := converter.GetDefaultDataConverter()
	decode := func(p *commonpb.Payload, out any) {
		t.Helper()
		if p == nil {
			t.Fatalf("missing payload")
		}
		if err := dc.FromPayload(p, out); err != nil {
			t.Fatal(err)
		}
	}
	for target, trigger := range want {
		q := fmt.Sprintf("WorkflowType = 'MergeWal' AND WalTarget = '%s' AND WalKind = 'generic' AND WalTrigger = '%s' AND ExecutionStatus = 'Completed'", target, trigger)
		var found []*workflowpb.WorkflowExecutionInfo
		waitFor(t, waitShort, "visibility to list "+target+" by trigger "+trigger, func() (bool, error) {
			res, n, err := e.listExecutions(q + " AND WalReclaimed >= 1")
			found = found[:0]
			for _, p := range res {
				found = append(found, p.GetExecutions()...)
			}
			return n == 1, err
		})
		ex := found[0]
		sa := ex.GetSearchAttributes().GetIndexedFields()
		var gotTrigger string
		var atStart, reclaimed int64
		var bytesF float64
		decode(sa[contract.WalTriggerName], &gotTrigger)
		decode(sa[contract.WalPendingAtStartName], &atStart)
		decode(sa[contract.WalReclaimedName], &reclaimed)
		decode(sa[contract.WalBytesMergedName], &bytesF)
		bytes := int64(bytesF)
		if gotTrigger != trigger || atStart < 1 || reclaimed < 1 || bytes <= 0 {
			t.Errorf("%s: WalTrigger %q (want %q), WalPendingAtStart %d, WalReclaimed %d, WalBytesMerged %d",
				target, gotTrigger, trigger, atStart, reclaimed, bytes)
		}
		memo := ex.GetMemo().GetFields()
		var mTrigger, mReason string
		var mReclaimed, mPasses, mAtStart, mBytes int64
		decode(memo[contract.MemoTrigger], &mTrigger)
		decode(memo[contract.MemoReclaimed], &mReclaimed)
		decode(memo[contract.MemoPasses], &mPasses)
		decode(memo[contract.MemoPendingAtStart], &mAtStart)
		decode(memo[contract.MemoBytesMerged], &mBytes)
		if p := memo[contract.MemoTriggerReason]; p != nil {
			decode(p, &mReason)
		}
		if mTrigger != trigger || mReclaimed != reclaimed || mPasses < 1 || mAtStart != atStart || mBytes != bytes {
			t.Errorf("%s: memo trigger %q reclaimed %d passes %d pending_at_start %d bytes %d; search attributes say %q %d %d %d",
				target, mTrigger, mReclaimed, mPasses, mAtStart, mBytes, trigger, reclaimed, atStart, bytes)
		}
		if trigger != contract.TriggerUnknown && mReason == "" {
			t.Errorf("%s: no trigger_reason in the memo", target)
		}
		t.Logf("%s: %s (%s), %d pending at start, %d reclaimed, %d bytes, %d passes", target, trigger, mReason, atStart, reclaimed, bytes, mPasses)

		// Its Prepare is named by shard and pass in the history Temporal Web shows.
		summaries := activitySummaries(t, e, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
		if !containsPrefix(summaries, "prepare shard ") || !(containsPrefix(summaries, "commit shard ") || containsPrefix(summaries, "commit round: shard ")) {
			t.Errorf("%s: activity summaries %q, want prepare/commit named by shard and pass", target, summaries)
		}
	}
	// `walkeeper history` lists each store's merge with its trigger and figures.
	for target, trigger := range want {
		stdout, stderr, code := runCLI(t, bin, "history", target, "--json", "--temporal", e.hostPort, "--namespace", e.ns)
		if code != 0 {
			t.Fatalf("walkeeper history %s: exit %d\n%s\n%s", target, code, stdout, stderr)
		}
		var runs []struct {
			Workflow  string  `json:"workflow"`
			Trigger   *string `json:"trigger"`
			Reclaimed *int64  `json:"reclaimed"`
			Passes    *int64  `json:"passes"`
		}
		if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
			t.Fatalf("walkeeper history %s --json: %v\n%s", target, err, stdout)
		}
		if len(runs) != 1 || runs[0].Workflow != contract.MergeWalWorkflow || runs[0].Trigger == nil || *runs[0].Trigger != trigger ||
			runs[0].Reclaimed == nil || *runs[0].Reclaimed < 1 || runs[0].Passes == nil || *runs[0].Passes < 1 {
			t.Errorf("walkeeper history %s: %s, want one MergeWal triggered by %s with reclaimed and passes", target, stdout, trigger)
		}
	}
	// One query per trigger finds exactly its merges: the saved-view recipe of the README.
	_, n, err := e.listExecutions(fmt.Sprintf("WorkflowType = 'MergeWal' AND WalTrigger = '%s'", contract.TriggerSweepAge))
	if err != nil || n != 1 {
		t.Errorf("WalTrigger = sweep-age lists %d runs (%v), want 1", n, err)
	}
}

func activitySummaries(t *testing.T, e *env, id, runID string) []string {
	t.Helper()
	var out []string
	for _, ev := range e.history(t, id, runID) {
		if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			continue
		}
		var s string
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, s)
	}
	return out
}

func containsPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) && strings.Contains(s, " pass ") {
			return true
		}
	}
	return false
}

// triggerStarts reads walkeeper_trigger_starts_total{trigger,result} from w's registry.
func triggerStarts(t *testing.T, w *worker.Worker, trigger, result string) float64 {
	t.Helper()
	mfs, err := w.Metrics().Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "walkeeper_trigger_starts_total" {
			v, _ := promtext.Value(mf, "trigger", trigger, "result", result)
			return v
		}
	}
	return 0
}
