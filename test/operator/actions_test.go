package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/test/reliability"
)

// resetPoint names where a reset goes: a --type, or the workflow task after the first
// completion of an activity (--event-id).
type resetPoint struct {
	name     string
	typ      string // FirstWorkflowTask, LastWorkflowTask
	activity string // Prepare, CommitRound
}

var (
	firstTask   = resetPoint{name: "first-task", typ: "FirstWorkflowTask"}
	lastTask    = resetPoint{name: "last-task", typ: "LastWorkflowTask"}
	resetPoints = []resetPoint{
		firstTask,
		{name: "after-prepare", activity: contract.PrepareActivity},
		{name: "after-commit", activity: contract.CommitRoundActivity},
		lastTask,
	}
)

// reset resets run of id to p with the CLI and returns the new run's ID.
func (c *opCase) reset(id, runID string, p resetPoint) string {
	c.t.Helper()
	args := []string{"workflow", "reset", "--workflow-id", id, "--run-id", runID, "--reason", "operator suite: " + p.name}
	if p.typ != "" {
		args = append(args, "--type", p.typ)
	} else {
		args = append(args, "--event-id", fmt.Sprint(c.eventAfter(id, runID, p.activity, 1)))
	}
	c.temporal(args...)
	next := c.latestRun(id)
	if next == runID {
		c.t.Fatalf("reset of %s/%s to %s made no new run", id, runID, p.name)
	}
	return next
}

// TestOperatorActions runs every case against one rig, each case on its own store.
func TestOperatorActions(t *testing.T) {
	r := startRig(t)
	type opTest struct {
		name string
		run  func(t *testing.T, r *rig)
	}
	var tests []opTest
	for _, p := range resetPoints {
		tests = append(tests,
			opTest{"reset-finished-merge/" + p.name, func(t *testing.T, r *rig) { resetFinishedMerge(t, r, p) }},
			opTest{"reset-running-merge/" + p.name, func(t *testing.T, r *rig) { resetRunningMerge(t, r, p) }})
	}
	for _, step := range []string{"prepare", "commit"} {
		tests = append(tests,
			opTest{"terminate-during-" + step, func(t *testing.T, r *rig) { stopMerge(t, r, "terminate", step) }},
			opTest{"cancel-during-" + step, func(t *testing.T, r *rig) { stopMerge(t, r, "cancel", step) }})
	}
	tests = append(tests,
		opTest{"reset-running-merge/reprepare-under-held-commit", resetUnderHeldCommit},
		opTest{"signal-garbage", signalGarbage},
		opTest{"merge-under-another-id", mergeUnderAnotherID},
		opTest{"cancel-after-commit-claimed", cancelAfterCommitClaimed},
		opTest{"reset-compact-base", resetCompactBase},
		opTest{"reset-sweep", func(t *testing.T, r *rig) {
			resetGlobal(t, r, contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{
				MergeMinGenerations: contract.MaxSweepMergeMinGenerations, MaxPendingAge: contract.MaxSweepMaxPendingAge,
				CompactMinRuns: -1})
		}},
		opTest{"reset-reconcile-demand", func(t *testing.T, r *rig) {
			resetGlobal(t, r, contract.ReconcileDemandWorkflow, contract.ReconcileDemandInput{})
		}},
		opTest{"reset-sweep-window", func(t *testing.T, r *rig) {
			resetGlobal(t, r, contract.SweepWindowWorkflow, contract.SweepWindowInput{
				Sweep: contract.MaintenanceSweepInput{
					MergeMinGenerations: contract.MaxSweepMergeMinGenerations, MaxPendingAge: contract.MaxSweepMaxPendingAge,
					CompactMinRuns: -1},
				Interval: time.Second, Window: 3 * time.Second})
		}},
		opTest{"reset-merge-wal-tick", func(t *testing.T, r *rig) {
			resetGlobal(t, r, contract.MergeWalTickWorkflow, nil)
		}},
	)
	t.Run("cases", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t, r)
			})
		}
	})
}

// resetFinishedToFirstAndLastTask waits for run of id to complete, resets it to its first
// workflow task, waits for that run, resets it to its last workflow task and waits again;
// then checks the histories.
func (c *opCase) resetFinishedToFirstAndLastTask(id, run string) {
	c.t.Helper()
	c.waitCompleted(id, run)
	for _, p := range []resetPoint{firstTask, lastTask} {
		run = c.reset(id, run, p)
		c.waitCompleted(id, run)
	}
	c.checkHistories()
}

// resetFinishedMerge: a MergeWal that finished is reset to p after more was sealed; the
// reset run must complete (no non-determinism), merge what was sealed, and leave no staged
// run behind.
func resetFinishedMerge(t *testing.T, r *rig, p resetPoint) {
	c := r.newCase(t)
	c.seal(2)
	if st, body := c.mergeWait(); st != http.StatusOK {
		t.Fatalf("first merge: %d %s", st, body)
	}
	id := contract.MergeWalID(c.tg)
	first := c.latestRun(id)
	c.seal(1)
	c.finish(id, c.reset(id, first, p), "after the reset run")
}

// resetRunningMerge: a MergeWal whose second base publish is held (one round committed,
// the next in flight, its attempt claimed) is reset to p; then the held publish goes on.
// The reset run must complete, the old run's late commit must not break it, and every row
// must be there.
func resetRunningMerge(t *testing.T, r *rig, p resetPoint) {
	c := r.newCase(t)
	c.seal(2)
	h := c.holdCommit(1)
	id, run := c.startHeld(h, "the second round's publish")
	next := c.reset(id, run, p)
	h.Release()
	<-h.Done()
	c.finish(id, next, "after the reset run")
}

// stopMerge terminates or cancels a MergeWal while its first Prepare uploads its staged
// run (step "prepare") or while its first round publishes (step "commit"), with an HTTP
// wait=true caller waiting on it.
func stopMerge(t *testing.T, r *rig, action, step string) {
	c := r.newCase(t)
	c.seal(2)
	var h *s3test.Hold
	if step == "commit" {
		h = c.holdCommit(0)
	} else {
		h = c.holdStaging()
	}
	id := contract.MergeWalID(c.tg)
	type answer struct {
		status int
		body   string
	}
	waited := make(chan answer, 1)
	go func() {
		st, body, err := callErr(http.MethodPost, c.api(1, "/merge-wal?wait=true"), nil)
		if err != nil {
			body = err.Error()
		}
		waited <- answer{st, body}
	}()
	c.held(h, "the held "+step)
	run := c.latestRun(id)
	switch action {
	case "terminate":
		c.temporal("workflow", "terminate", "--workflow-id", id, "--run-id", run, "--reason", "operator suite")
	case "cancel":
		c.temporal("workflow", "cancel", "--workflow-id", id, "--run-id", run)
	}
	h.Release()
	<-h.Done()
	want := map[string]enumspb.WorkflowExecutionStatus{
		"terminate": enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		"cancel":    enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED,
	}[action]
	if st := c.waitClosed(id, run); st != want {
		t.Fatalf("%s: run ended %s, want %s:\n%s", action, st, want, c.historyText(id, run))
	}
	var a answer
	select {
	case a = <-waited:
	case <-time.After(waitLong):
		t.Fatalf("the wait=true caller got no answer %s after the %s", waitLong, action)
	}
	t.Logf("wait=true caller after %s: %d %s", action, a.status, a.body)
	said := map[string]string{"terminate": "was terminated", "cancel": "was cancelled"}[action]
	if a.status != http.StatusConflict || !strings.Contains(a.body, `"merge_stopped"`) || !strings.Contains(a.body, said) {
		t.Errorf("wait=true caller after %s: %d %s; want 409 merge_stopped saying it %s", action, a.status, a.body, said)
	}
	if action == "cancel" && step == "commit" {
		// The pass whose commit the cancel interrupted is settled by the cancelled run itself:
		// an Abort on a disconnected context, not left for the next merge.
		if n := c.completed(id, run, contract.AbortActivity); n == 0 {
			t.Errorf("the cancelled run completed no Abort:\n%s", c.historyText(id, run))
		}
	}
	c.verify("after the "+action, true)
	c.drain()
}

// signalGarbage sends ActivityStateSignal payloads no activity would send (wrong type,
// unknown activity, nonsense state) to a running MergeWal; the run must go on and complete.
func signalGarbage(t *testing.T, r *rig) {
	c := r.newCase(t)
	c.seal(2)
	h := c.holdCommit(0)
	id, run := c.startHeld(h, "the first round's publish")
	for _, input := range []string{
		`"garbage"`,
		`[1,2,3]`,
		`{"activity_id":"Prepare/not-a-run/1","state":"exploded","attempt":-7}`,
		`{"activity_id":"","state":"","attempt":1e300}`,
		`null`,
	} {
		c.temporal("workflow", "signal", "--workflow-id", id, "--run-id", run, "--name", contract.ActivityStateSignal, "--input", input)
	}
	// The status query still answers while the signals sit in the history.
	out := c.temporal("workflow", "query", "--workflow-id", id, "--run-id", run, "--type", contract.StatusQuery)
	if !strings.Contains(out, c.tg.String()) {
		t.Errorf("status query after garbage signals: %s", out)
	}
	// The three that do not decode (a string, an array, an attempt beyond int) are refused and
	// counted; the unknown activity and null decode and are ignored.
	qctx, qcancel := context.WithTimeout(context.Background(), waitShort)
	defer qcancel()
	v, err := r.c.QueryWorkflow(qctx, id, run, contract.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st contract.MergeWalStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.RefusedSignals != 3 {
		t.Errorf("the status counts %d refused signals, want 3", st.RefusedSignals)
	}
	h.Release()
	c.finish(id, run, "after the signals")
}

// resetCompactBase: a finished CompactBase reset to its first and to its last workflow
// task completes again, without non-determinism, and loses no row.
func resetCompactBase(t *testing.T, r *rig) {
	c := r.newCase(t)
	c.seal(2)
	if st, body := c.mergeWait(); st != http.StatusOK {
		t.Fatalf("merge: %d %s", st, body)
	}
	id := contract.CompactID(c.tg)
	c.ids[id] = true
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	run, err := contract.StartCompactBase(ctx, r.c, c.tg, contract.CompactBaseInput{Target: c.tg.String(), MaxRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.runs[run.GetRunID()] = true
	c.resetFinishedToFirstAndLastTask(id, run.GetRunID())
	c.verify("after the compaction resets", false)
	c.drain()
}

// resetGlobal: a finished run of a workflow other than MergeWal and CompactBase (the sweep,
// a sweep window, the demand reconcile, a schedule's tick) reset to its first and to its
// last workflow task completes again.
//
// A nil input stands for the case's own target (MergeWalTick, which starts or attaches to
// the case store's MergeWal).
func resetGlobal(t *testing.T, r *rig, workflowType string, input any) {
	c := r.newCase(t)
	if input == nil {
		input = contract.MergeWalTickInput{Target: c.tg.String()}
	}
	id := fmt.Sprintf("op-%s-%s", strings.ToLower(workflowType), c.tg.Name)
	c.resetFinishedToFirstAndLastTask(id, c.execute(waitLong, id, workflowType, input))
}

// execute starts a run of workflowType under id, waiting at most timeout for the server
// to take it, and makes it one of the case's runs, whose histories the case checks.
func (c *opCase) execute(timeout time.Duration, id, workflowType string, input any) string {
	c.t.Helper()
	c.ids[id] = true
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	run, err := c.r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: contract.TaskQueue}, workflowType, input)
	if err != nil {
		c.t.Fatal(err)
	}
	c.runs[run.GetRunID()] = true
	return run.GetRunID()
}

// resetUnderHeldCommit: the old run's first publish is held after its attempt was claimed
// "commit"; more is sealed; the merge is reset to its first workflow task, so the new run's
// first Prepare is a retry of the very attempt whose commit is held, and plans a longer range.
// That Prepare must not delete the staged run the held commit is about to publish: once the
// held publish lands, every row must still be readable.
func resetUnderHeldCommit(t *testing.T, r *rig) {
	c := r.newCase(t)
	c.seal(2)
	first := c.holdCommit(0)
	id := contract.MergeWalID(c.tg)
	var started struct {
		RunID string `json:"run_id"`
	}
	c.must(http.StatusAccepted, http.MethodPost, c.api(1, "/merge-wal"), map[string]any{"max_generations": 8}, &started)
	run := started.RunID
	c.runs[run] = true
	c.held(first, "the old run's first publish")
	c.seal(1)
	second := c.holdCommit(0) // the new run's first publish
	next := c.reset(id, run, firstTask)
	c.held(second, "the new run's first publish")
	// The new run's first Prepare (the old run's attempt, retried) has completed.
	prepared := c.eventAfter(id, next, contract.PrepareActivity, 1)
	t.Logf("new run %s prepared (event %d); releasing the old run's publish", next, prepared)
	first.Release()
	<-first.Done()
	c.verify("after the old run's held publish landed", true)
	second.Release()
	c.finish(id, next, "after the reset run")
}

// mergeUnderAnotherID: an operator starts MergeWal by hand under an ID of their own (one that
// is not a store's merge ID passes the workflow's ID check), beside the store's own merge, both
// held at their first publish and then released together: two runs prepare and commit the same
// shards at once. The claims and the conditional publish must keep every row right, merge
// nothing twice, and leave nothing behind once the next merge has run.
func mergeUnderAnotherID(t *testing.T, r *rig) {
	c := r.newCase(t)
	c.seal(2)
	own := c.holdCommit(0)
	id, run := c.startHeld(own, "the store's own merge's first publish")
	other := c.holdCommit(0)
	byHand := "op-by-hand-" + c.tg.Name
	handRun := c.execute(waitShort, byHand, contract.MergeWalWorkflow, contract.MergeWalInput{Target: c.tg.String()})
	c.held(other, "the hand-started merge's first publish")
	own.Release()
	other.Release()
	c.waitCompleted(id, run)
	c.waitCompleted(byHand, handRun)
	c.checkHistories()
	c.verify("after both merges", true)
	c.drain()
}

// cancelAfterCommitClaimed: a MergeWal is cancelled while its first round's publish is held,
// its attempts claimed "commit", and the publish is released only once the CommitRound has
// heartbeated since, so its worker has cancelled its context. The commit must still publish
// and finish, the cancelled run's Abort find it present, and the run leave no claim, no
// staged run and no merged generation behind, before any further merge.
func cancelAfterCommitClaimed(t *testing.T, r *rig) {
	c := r.newCase(t)
	c.seal(2)
	h := c.holdCommit(0)
	id, run := c.startHeld(h, "the first round's publish")
	cancelled := time.Now()
	c.temporal("workflow", "cancel", "--workflow-id", id, "--run-id", run)
	deadline := time.Now().Add(waitLong)
	for beat := false; !beat; {
		// Its worker learns the cancel at a heartbeat, or the activity has ended since.
		beat = true
		for _, pa := range c.describe(id, run).GetPendingActivities() {
			if pa.GetActivityType().GetName() == contract.CommitRoundActivity && !pa.GetLastHeartbeatTime().AsTime().After(cancelled) {
				beat = false
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held CommitRound neither heartbeated nor ended %s after the cancel:\n%s", waitLong, c.historyText(id, run))
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.Release()
	<-h.Done()
	if st := c.waitClosed(id, run); st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Fatalf("run ended %s, want canceled:\n%s", st, c.historyText(id, run))
	}
	if n := c.completed(id, run, contract.AbortActivity); n == 0 {
		t.Errorf("the cancelled run completed no Abort:\n%s", c.historyText(id, run))
	}
	// The CommitRound may still be finishing on its worker: poll for the clean state.
	for {
		_, leftover := c.layoutAfterStop()
		if leftover == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cancel: %s", leftover)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.verify("after the cancel", true) // the run's other passes leave abort claims for the next merge
	c.drain()
}

// startHeld starts the case's MergeWal by the HTTP route and waits until h holds the
// request it was armed for; it returns the merge's workflow ID and run ID.
func (c *opCase) startHeld(h *s3test.Hold, what string) (id, run string) {
	c.t.Helper()
	run = c.startMerge()
	c.held(h, what)
	return contract.MergeWalID(c.tg), run
}

// finish waits for run of id to complete, checks the case's histories and rows (what says
// when), and drains the store with a next merge.
func (c *opCase) finish(id, run, what string) {
	c.t.Helper()
	c.waitCompleted(id, run)
	c.checkHistories()
	c.verify(what, false)
	c.drain()
}

// layoutAfterStop inspects the case's store and says what a stopped merge left that a
// finished one does not ("" = nothing): an unreferenced staged run, an attempt claim, a
// generation the watermark covers still listed, or a generation file no manifest lists.
func (c *opCase) layoutAfterStop() (*reliability.Layout, string) {
	c.t.Helper()
	db, _ := c.openReader()
	lay, err := reliability.InspectLayout(context.Background(), db.Bucket(), c.tg)
	if err != nil {
		c.t.Fatal(err)
	}
	var left []string
	for _, o := range lay.Orphans {
		if strings.HasPrefix(filepath.Base(o), "m-") {
			left = append(left, "staged run "+o)
		}
	}
	for sh, sl := range lay.Shards {
		for _, g := range sl.ListedGens {
			if g <= lay.Watermarks[sh] {
				left = append(left, fmt.Sprintf("shard %s lists merged generation %d", sh, g))
			}
		}
		for _, a := range sl.Attempts {
			// An abort claim of a range the watermark has not reached is what stops a late
			// commit of that attempt: the next merge of the shard collects it.
			raw, err := db.Bucket().Get(context.Background(), a)
			var claim struct {
				State   string `json:"state"`
				Through uint64 `json:"through"`
			}
			if err == nil && json.Unmarshal(raw, &claim) == nil && claim.State == "abort" && claim.Through > lay.Watermarks[sh] {
				continue
			}
			left = append(left, "claim "+a)
		}
		for _, g := range sl.UnlistedGens {
			left = append(left, "generation file "+g)
		}
	}
	return lay, strings.Join(left, "; ")
}
