package integration

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
)

// fairnessOff runs TestLightKindMergeDoesNotWaitForAnotherKindsBacklog against a server of
// its own with matching.enableFairness=false, where it must fail: the check that the test
// sees what fairness changes.
var fairnessOff = flag.Bool("fairness-off", false, "run the fair-share test on a server without task-queue fairness (it must fail)")

// fairBacklog is the rollout merges queued ahead of the generic one.
const fairBacklog = 300

// A generic merge started behind fairBacklog queued rollout merges, on one worker with the
// default slots, completes before most of them: the merges' workflow and activity tasks
// carry their kind as fairness key (contract.MergePriority), so the server hands the
// generic kind its turn instead of draining the rollout backlog first. The assertion is on
// completion order, not on time.
func TestLightKindMergeDoesNotWaitForAnotherKindsBacklog(t *testing.T) {
	e := newEnv(t)
	if *fairnessOff {
		hostPort, c := testtemporal.StartSelected(t, testtemporal.Options{DynamicConfig: map[string]any{"matching.enableFairness": false}})
		e.hostPort, e.c, e.ns = hostPort, c, "default"
	}
	// A task lost in delivery on a loaded server (the worker's poll gave up as the server
	// answered it) is retried after its timeout: 10 s for a workflow task, a minute for a
	// Prepare, long enough for the backlog to drain past the light merge whatever the order.
	// Such a round says nothing about fairness, so the scenario runs once more.
	const rounds = 2
	for round := 1; ; round++ {
		before, light := e.queueBehindBacklog(round)
		if before < fairBacklog/3 {
			return
		}
		e.logHistory(light.GetID(), light.GetRunID())
		c := e.historyCost(light.GetID(), light.GetRunID())
		if c.Retries+c.WorkflowTaskTimeouts == 0 || round == rounds {
			t.Fatalf("the generic merge waited for %d of %d queued rollout merges: the backlog of another kind delays it", before, fairBacklog)
		}
		t.Logf("round %d: a task of the generic merge was delivered again; the order says nothing of fairness, running it again", round)
	}
}

// queueBehindBacklog writes fairBacklog rollout stores and a generic one, queues their merges
// with no worker polling (the generic merge last), starts a worker, and returns how many of the
// rollout merges closed before the generic one, and the generic merge's run.
func (e *env) queueBehindBacklog(round int) (int, client.WorkflowRun) {
	t := e.t
	t.Helper()
	start := time.Now()
	// One writer shard holds one pending generation of every store; the worker started
	// later as that shard prepares them on its own queue.
	writer := e.openDB(fmt.Sprintf("writer-%d", round), nil)
	targets := make([]store.Target, fairBacklog)
	for i := range targets {
		targets[i] = mustTarget(t, fmt.Sprintf("rollout:backlog-%d-%03d", round, i))
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, tg := range targets {
		g.Go(func() error { return writeOneGeneration(e.ctx(waitLong), writer, tg) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	light := fmt.Sprintf("generic:light-%d", round)
	e.writeGenerations(e.createStore(writer, light), "l", 1, 10)
	if err := writer.Close(e.ctx(waitShort)); err != nil {
		t.Fatal(err)
	}

	t.Logf("round %d: %d stores written in %s", round, fairBacklog+1, time.Since(start).Round(time.Millisecond))
	// Queue the backlog, then the light merge, with no worker polling yet.
	runs := make([]client.WorkflowRun, fairBacklog)
	g.SetLimit(8)
	for i, tg := range targets {
		g.Go(func() error {
			run, err := e.startMergeWal(tg, contract.MergeWalInput{})
			runs[i] = run
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	lightRun := e.startMerge(light, contract.MergeWalInput{})

	t.Logf("round %d: %d merges queued after %s", round, fairBacklog+1, time.Since(start).Round(time.Millisecond))
	w := e.startWorker(e.config(fmt.Sprintf("writer-%d", round)))
	// A second round starts on a server without this worker: its slots would change the setup.
	defer func() {
		if err := w.Stop(e.ctx(2 * time.Minute)); err != nil {
			t.Errorf("stop worker: %v", err)
		}
	}()
	// Twice the usual wait: without fairness (-fairness-off) the light merge waits for most of
	// the backlog, and the test should fail on the order, not on this wait.
	if res := e.mergeResult(lightRun, 2*waitLong); res.Reclaimed != 1 {
		t.Fatalf("light merge reclaimed %d generations, want 1", res.Reclaimed)
	}
	// A rollout merge still running closes after the light one; the rest of the backlog
	// drains until the worker stops.
	lightClosed, ok := e.closedAt(lightRun)
	if !ok {
		t.Fatalf("%s has not closed", lightRun.GetID())
	}
	before := 0
	for _, run := range runs {
		if closed, ok := e.closedAt(run); ok && closed.Before(lightClosed) {
			before++
		}
	}
	t.Logf("round %d: the generic merge closed after %d of %d rollout merges queued ahead of it (%s after the start)",
		round, before, fairBacklog, time.Since(start).Round(time.Millisecond))
	return before, lightRun
}

// writeOneGeneration creates tg (a rollout store) and seals one generation of 5 rows.
func writeOneGeneration(ctx context.Context, db *store.DB, tg store.Target) error {
	s, err := db.Create(ctx, tg, store.CreateOptions{})
	if err != nil {
		return err
	}
	rows := make([]map[string]any, 5)
	for i := range rows {
		rows[i] = map[string]any{"id": fmt.Sprintf("r%d", i), "run_id": "run", "step": i, "reward": 0.5, "done": false}
	}
	if err := appendRows(ctx, s, rows); err != nil {
		return err
	}
	res, err := s.Flush(ctx)
	if err == nil && !res.Sealed {
		err = fmt.Errorf("flush of %s sealed nothing", tg)
	}
	return err
}

// closedAt is when run's execution closed, ok false while it runs.
func (e *env) closedAt(run client.WorkflowRun) (time.Time, bool) {
	e.t.Helper()
	d, err := e.describe(run.GetID(), run.GetRunID())
	if err != nil {
		e.t.Fatalf("describe %s: %v", run.GetID(), err)
	}
	ct := d.GetWorkflowExecutionInfo().GetCloseTime()
	return ct.AsTime(), ct != nil
}
