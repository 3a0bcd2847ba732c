package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	tworker "go.temporal.io/sdk/worker"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
	"github.com/walkeeper/walkeeper/workflows"
)

// recordEnv turns TestRecordReplayHistories on.
const recordEnv = "WALKEEPER_RECORD_HISTORIES"

// recordingEnv skips t unless recordEnv is set; otherwise it returns a test environment
// and the directory the recorded histories go to (workflows/testdata/replay). files names
// what the caller writes there, for the skip message.
func recordingEnv(t *testing.T, files string) (*env, string) {
	t.Helper()
	if os.Getenv(recordEnv) == "" {
		t.Skip("set " + recordEnv + "=1 to record workflows/testdata/replay/" + files)
	}
	e := newEnv(t)
	root, err := cachebin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return e, filepath.Join(root, "workflows", "testdata", "replay")
}

// TestRecordReplayHistories records the histories that workflows/replay_test.go replays:
// MergeWal (one shard; serial and with parallel prepares, two shards), CompactBase, MaintenanceSweep,
// MergeWalTick and ReconcileDemand, each run against the real server with real workers and
// kept small. It runs only with WALKEEPER_RECORD_HISTORIES=1 and (over)writes
// workflows/testdata/replay/*.json:
//
//	WALKEEPER_RECORD_HISTORIES=1 go test ./test/integration -run TestRecordReplayHistories
//
// Record after a workflow change (see workflows/testdata/replay/README.md).
func TestRecordReplayHistories(t *testing.T) {
	e, outDir := recordingEnv(t, "*.json")

	const target = "generic:replay"
	wa, sa, sb := e.twoWriters("rec", target)
	write := func() {
		e.writeGenerations(sa, "a", 1, 5)
		e.writeGenerations(sb, "b", 1, 5)
	}

	save := func(name, id, runID string) {
		t.Helper()
		n := len(e.saveHistory(filepath.Join(outDir, name), id, runID))
		t.Logf("%s: %d events (%s / %s)", name, n, id, runID)
	}

	// MergeWal of one shard, one pass: the run workflows' TestRecordedMergeWalActions holds
	// to its action budget.
	one := e.createStore(wa.DB(), "generic:replay-one")
	e.writeGenerations(one, "o", 1, 5)
	run := e.startMerge("generic:replay-one", contract.MergeWalInput{})
	if res := e.mergeResult(run, waitLong); res.Reclaimed != 1 {
		t.Fatalf("one-shard merge: %+v", res)
	}
	save("merge-wal-one-shard.json", run.GetID(), run.GetRunID())

	// MergeWal, serial, two shards.
	write()
	run = e.startMerge(target, contract.MergeWalInput{})
	if res := e.mergeResult(run, waitLong); res.Reclaimed != 2 {
		t.Fatalf("serial merge: %+v", res)
	}
	save("merge-wal-serial.json", run.GetID(), run.GetRunID())

	// The same MergeWal reset, as Temporal Web's Reset button does, to the workflow task
	// after its first Prepare completed: the reset run replays the copied events, so its
	// activity IDs must not depend on the run ID (workflows/tracker.go).
	resetRun := e.resetAfterFirst(run.GetID(), run.GetRunID(), contract.PrepareActivity)
	if err := e.c.GetWorkflow(e.ctx(waitShort), run.GetID(), resetRun).Get(e.ctx(waitLong), nil); err != nil {
		t.Fatalf("reset merge: %v", err)
	}
	save("merge-wal-reset.json", run.GetID(), resetRun)

	// MergeWal, parallel prepares.
	write()
	run = e.startMerge(target, contract.MergeWalInput{ParallelPrepare: true})
	if res := e.mergeResult(run, waitLong); res.Reclaimed != 2 {
		t.Fatalf("parallel merge: %+v", res)
	}
	save("merge-wal-parallel.json", run.GetID(), run.GetRunID())

	// CompactBase: four runs down to one.
	crun, err := contract.StartCompactBase(e.ctx(waitShort), e.c, mustTarget(t, target), contract.CompactBaseInput{TargetRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	var cres contract.CompactBaseResult
	if err := crun.Get(e.ctx(waitLong), &cres); err != nil || cres.Committed < 1 {
		t.Fatalf("compact: %+v %v", cres, err)
	}
	save("compact-base.json", crun.GetID(), crun.GetRunID())

	// MaintenanceSweep: one store over the merge threshold, one over the compaction
	// threshold, the rest healthy.
	e.writeGenerations(e.createStore(wa.DB(), "generic:swept"), "s", 1, 3)
	e.createStore(wa.DB(), "rollout:idle")
	sres, srun := e.sweep("record/maintenance-sweep", contract.MaintenanceSweepInput{MergeMinGenerations: 1, CompactMinRuns: 1})
	if len(sres.Started) == 0 {
		t.Fatalf("sweep: %+v, want a start", sres)
	}
	save("maintenance-sweep.json", srun.GetID(), srun.GetRunID())
	for _, st := range sres.Started { // let what the sweep started finish
		if err := e.c.GetWorkflow(e.ctx(waitShort), st.WorkflowID, st.RunID).Get(e.ctx(waitLong), nil); err != nil {
			t.Fatalf("%s started by the sweep: %v", st.WorkflowID, err)
		}
	}

	// MergeWalTick, the per-target schedule action.
	e.writeGenerations(e.createStore(wa.DB(), "generic:ticked"), "t", 1, 3)
	trun := e.execute("record/merge-wal-tick", contract.MergeWalTickWorkflow, contract.MergeWalTickInput{Target: "generic:ticked"})
	var tres contract.MergeWalTickResult
	if err := trun.Get(e.ctx(waitLong), &tres); err != nil || tres.RunID == "" {
		t.Fatalf("tick: %+v %v", tres, err)
	}
	save("merge-wal-tick.json", trun.GetID(), trun.GetRunID())
	if res := e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), tres.WorkflowID, tres.RunID), waitLong); res.Reclaimed != 1 {
		t.Fatalf("merge started by the tick: %+v", res)
	}

	// ReconcileDemand, a page per kind, continued as new after the first.
	rrun := e.execute("record/reconcile-demand", contract.ReconcileDemandWorkflow, contract.ReconcileDemandInput{PageSize: 10, PagesPerRun: 1})
	var rres contract.ReconcileDemandResult
	if err := e.c.GetWorkflow(e.ctx(waitShort), rrun.GetID(), "").Get(e.ctx(waitLong), &rres); err != nil {
		t.Fatalf("reconcile: %+v %v", rres, err)
	}
	save("reconcile-demand.json", rrun.GetID(), rrun.GetRunID())

	// What was just written replays against the current code.
	files, _ := filepath.Glob(filepath.Join(outDir, "*.json"))
	replay(t, files...)
}

// twoWriters starts workers prefix-a and prefix-b and creates target through each: one
// store, two shards. Returns the first worker and both writers' handles.
func (e *env) twoWriters(prefix, target string) (*worker.Worker, *store.Store, *store.Store) {
	e.t.Helper()
	wa := e.startWorker(e.config(prefix + "-a"))
	wb := e.startWorker(e.config(prefix + "-b"))
	return wa, e.createStore(wa.DB(), target), e.createStore(wb.DB(), target)
}

// resetAfterFirst resets the finished run id/runID to the workflow task that completed
// right after the first activity of type activity completed, and returns the new run's ID.
func (e *env) resetAfterFirst(id, runID, activity string) string {
	e.t.Helper()
	scheduled := map[int64]string{}
	var completedAfter, resetTo int64
	for _, ev := range e.history(e.t, id, runID) {
		if resetTo != 0 {
			break
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if completedAfter == 0 && scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] == activity {
				completedAfter = ev.GetEventId()
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if completedAfter != 0 {
				resetTo = ev.GetEventId()
			}
		}
	}
	if resetTo == 0 {
		e.t.Fatalf("%s/%s: no workflow task completed after a %s", id, runID, activity)
	}
	resp, err := e.c.ResetWorkflowExecution(e.ctx(waitShort), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 e.ns,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    "record a reset history",
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 id + "/" + runID + "/reset",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetRunId()
}

// saveHistory writes the full history of one run as JSON in the format of
// `temporal workflow show --output json`, which ReplayWorkflowHistoryFromJSONFile reads, and
// returns its events.
func (e *env) saveHistory(path, id, runID string) []*historypb.HistoryEvent {
	e.t.Helper()
	events := e.history(e.t, id, runID)
	h := &historypb.History{Events: events}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return events
}

// TestRecordReplayHistoriesSweepWindow records the SweepWindow histories (with the command
// of TestRecordReplayHistories, or alone with -run TestRecordReplayHistoriesSweepWindow):
// sweep-window.json, a first run with idle rounds, a round that starts a merge and a
// sweep-now signal, ending in continue-as-new (a small event budget), and
// sweep-window-continued.json, the next run to the window's end.
func TestRecordReplayHistoriesSweepWindow(t *testing.T) {
	e, outDir := recordingEnv(t, "sweep-window*.json")
	w := e.startWorker(e.config("rec-window"))
	e.writeGenerations(e.createStore(w.DB(), "generic:quiet"), "q", 1, 2)

	run := e.execute("record/sweep-window", contract.SweepWindowWorkflow, contract.SweepWindowInput{
		Sweep: contract.MaintenanceSweepInput{MergeMinGenerations: 3}, Interval: 2 * time.Second, Window: 40 * time.Second, EventBudget: 150,
	})
	time.Sleep(5 * time.Second) // idle rounds
	e.writeGenerations(e.createStore(w.DB(), "generic:hot"), "h", 3, 2)
	waitFor(t, waitShort, "the window to start MergeWal of generic:hot", func() (bool, error) {
		_, err := e.describe(contract.MergeWalID(mustTarget(t, "generic:hot")), "")
		return err == nil, nil
	})
	if err := e.c.SignalWorkflow(e.ctx(waitShort), run.GetID(), "", contract.SweepNowSignal, nil); err != nil {
		t.Fatal(err)
	}
	var res contract.SweepWindowResult
	if err := e.c.GetWorkflow(e.ctx(waitShort), run.GetID(), "").Get(e.ctx(waitLong), &res); err != nil {
		t.Fatalf("window: %v", err)
	}
	if res.Runs < 2 || res.Totals.Started < 1 {
		t.Fatalf("window: %+v, want a continued run and a start", res)
	}
	desc, err := e.describe(run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	e.keepHistory(t, outDir, "sweep-window.json", run.GetID(), run.GetRunID(), "")
	e.keepHistory(t, outDir, "sweep-window-continued.json", run.GetID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "")
	t.Logf("the window: %d runs, %+v", res.Runs, res.Totals)
}

// TestRecordReplayHistoriesHotRounds records merge-wal-hot-rounds.json (with the command of
// TestRecordReplayHistories, or alone with -run TestRecordReplayHistoriesHotRounds): a
// MergeWal of two shards whose writers seal while it merges, so it turns hot and its hot
// rounds commit once per round (the hot-round-commits change, beside the v1 histories).
func TestRecordReplayHistoriesHotRounds(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-hot-rounds.json")
	const target = "generic:replay-hot"
	_, sa, sb := e.twoWriters("rec-hot", target)
	e.writeGenerations(sa, "a", 2, 2)
	e.writeGenerations(sb, "b", 2, 2)

	// Both writers seal every 100 ms for 12 s from the merge's start: its confirming listing
	// finds new generations (hot), and its next listing, 10 s later, a round of both shards.
	run := e.startMerge(target, contract.MergeWalInput{})
	for i, end := 0, time.Now().Add(12*time.Second); time.Now().Before(end); i++ {
		e.writeGenerations(sa, fmt.Sprintf("a%03d-", i), 1, 2)
		e.writeGenerations(sb, fmt.Sprintf("b%03d-", i), 1, 2)
		time.Sleep(100 * time.Millisecond)
	}
	res := e.mergeResult(run, waitLong)
	name := "merge-wal-hot-rounds.json"
	events := e.keepHistory(t, outDir, name, run.GetID(), run.GetRunID(), "")
	t.Logf("%s: %d passes, %d generations", name, res.Passes, res.Reclaimed)
	markers, twoShardCommits := versionMarkers(t, events, "hot-round-commits"), 0
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == contract.CommitRoundActivity {
			var p contract.CommitRoundParams
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Prepared) == 2 {
				twoShardCommits++
			}
		}
	}
	if markers != 1 || twoShardCommits == 0 {
		t.Fatalf("%s: %d version markers, %d CommitRounds of both shards; want 1 hot-round-commits marker and some (a hot round)", name, markers, twoShardCommits)
	}
}

// TestRecordReplayHistoriesAbortSurvivesCancel records merge-wal-cancel-during-abort.json
// (alone with -run TestRecordReplayHistoriesAbortSurvivesCancel): a one-shard MergeWal
// whose first round commit answers stale, cancelled while the pass's Abort runs. On the
// abort-survives-cancel path the Cancel does not cancel the Abort: it completes, then the run
// ends cancelled.
func TestRecordReplayHistoriesAbortSurvivesCancel(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-cancel-during-abort.json")
	const target = "generic:replay-cancel"
	db := e.openDB("rec-cancel", nil)
	e.writeGenerations(e.createStore(db, target), "c", 1, 2)
	var staled atomic.Bool
	inAbort, release := make(chan struct{}), make(chan struct{})
	e.startHarness(harnessOptions{Shared: db, Shards: []*store.DB{db}, Register: func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
			if !staled.CompareAndSwap(false, true) {
				return a.CommitRound(ctx, p)
			}
			var res contract.CommitRoundResult
			for _, pm := range p.Prepared {
				res.Shards = append(res.Shards, contract.RoundShardResult{Shard: pm.Shard, Outcome: contract.RoundStale, Reason: "stale for the recording"})
			}
			return res, nil
		}, activity.RegisterOptions{Name: contract.CommitRoundActivity, DisableAlreadyRegisteredCheck: true})
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.AbortParams) (contract.AbortResult, error) {
			close(inAbort)
			<-release
			return a.Abort(ctx, p)
		}, activity.RegisterOptions{Name: contract.AbortActivity, DisableAlreadyRegisteredCheck: true})
	}})

	run := e.startMerge(target, contract.MergeWalInput{})
	select {
	case <-inAbort:
	case <-time.After(waitLong):
		t.Fatal("the stale pass never aborted")
	}
	if err := e.c.CancelWorkflow(e.ctx(waitShort), run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	// The Abort goes on only once the run has taken the Cancel in a completed workflow task.
	waitFor(t, waitLong, "the run to take the cancel", func() (bool, error) {
		events, err := actioncount.History(e.ctx(waitShort), e.c, run.GetID(), run.GetRunID())
		if err != nil {
			return false, err
		}
		requested := false
		for _, ev := range events {
			requested = requested || ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
			if requested && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return true, nil
			}
		}
		return false, nil
	})
	close(release)
	if err := run.Get(e.ctx(waitLong), nil); !temporal.IsCanceledError(err) {
		t.Fatalf("the cancelled merge ended with %v", err)
	}
	name := "merge-wal-cancel-during-abort.json"
	events := e.keepHistory(t, outDir, name, run.GetID(), run.GetRunID(), "")
	requested, abortedAfter, cancelledActivities := false, false, 0
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			requested = true
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			abortedAfter = abortedAfter || requested
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
			cancelledActivities++
		}
	}
	if !abortedAfter || cancelledActivities != 0 {
		t.Fatalf("%s: an activity completed after the cancel: %v; activities cancelled: %d; want the Abort completed and none cancelled", name, abortedAfter, cancelledActivities)
	}
}

// TestRecordReplayHistoriesAbortCountsOwnPass records merge-wal-abort-another-run.json
// (alone with -run TestRecordReplayHistoriesAbortCountsOwnPass): a one-shard MergeWal on the
// abort-counts-own-pass path whose round commit fails outright after another attempt's run
// published the same pass; the pass's Abort finds the range committed by that run, so the
// run counts the pass but reports none of its generations reclaimed.
func TestRecordReplayHistoriesAbortCountsOwnPass(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-abort-another-run.json")
	const target = "generic:replay-another-run"
	db := e.openDB("rec-another", nil)
	s := e.createStore(db, target)
	e.writeGenerations(s, "r", 2, 2)
	var raced atomic.Bool
	e.startHarness(harnessOptions{Shared: db, Shards: []*store.DB{db}, Register: func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
			if !raced.CompareAndSwap(false, true) {
				return a.CommitRound(ctx, p)
			}
			other, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: "record/another-run"})
			if err != nil {
				return contract.CommitRoundResult{}, err
			}
			if _, err := s.CommitRound(ctx, []*store.PreparedMerge{other}); err != nil {
				return contract.CommitRoundResult{}, err
			}
			return contract.CommitRoundResult{}, temporal.NewNonRetryableApplicationError("failed for the recording", contract.ErrTypeInternal, nil)
		}, activity.RegisterOptions{Name: contract.CommitRoundActivity, DisableAlreadyRegisteredCheck: true})
	}})

	run := e.startMerge(target, contract.MergeWalInput{})
	res := e.mergeResult(run, waitLong)
	if !raced.Load() || res.Passes != 1 || res.Reclaimed != 0 || res.ShardsFailed != 0 {
		t.Fatalf("result %+v; want 1 pass, found committed by another run, 0 generations reclaimed", res)
	}
	e.keepHistory(t, outDir, "merge-wal-abort-another-run.json", run.GetID(), run.GetRunID(), "abort-counts-own-pass")
}

// TestRecordReplayHistoriesResultCapped records merge-wal-result-capped.json (alone with
// -run TestRecordReplayHistoriesResultCapped): a two-shard MergeWal on the merge-result-capped
// path whose shard that sorts last fails its Prepare, so its result lists the failed shard
// first and counts it in shards_failed.
func TestRecordReplayHistoriesResultCapped(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-result-capped.json")
	const target = "generic:replay-capped"
	run, failing := e.mergeTwoShards("rec-capped", target, 1, "failed for the recording", contract.MergeWalInput{})
	res := e.mergeResult(run, waitLong)
	if len(res.Shards) != 2 || res.Shards[0].Shard != failing || res.ShardsFailed != 1 || res.Reclaimed != 1 {
		t.Fatalf("result %+v; want the failed shard %s listed first, 1 failed, 1 generation reclaimed", res, failing)
	}
	e.keepHistory(t, outDir, "merge-wal-result-capped.json", run.GetID(), run.GetRunID(), "")
}

// TestRecordReplayHistoriesResultErrorsCut records merge-wal-result-errors-cut.json (alone
// with -run TestRecordReplayHistoriesResultErrorsCut): a two-shard MergeWal on the
// merge-result-errors-cut path whose shard that sorts last fails its Prepare with a long error
// of characters JSON escapes, so its result lists that error cut to
// contract.MaxFailureTextBytes of JSON.
func TestRecordReplayHistoriesResultErrorsCut(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-result-errors-cut.json")
	const target = "generic:replay-errors-cut"
	long := "failed for the recording: " + strings.Repeat("<Error><Code>AccessDenied</Code></Error>\n", 200)
	run, failing := e.mergeTwoShards("rec-errors-cut", target, 1, long, contract.MergeWalInput{})
	res := e.mergeResult(run, waitLong)
	if len(res.Shards) != 2 || res.Shards[0].Shard != failing || res.ShardsFailed != 1 || !cutToJSON(res.Shards[0].Error, contract.MaxFailureTextBytes) {
		t.Fatalf("result %+v; want the failed shard %s listed first with its error cut to %d bytes of JSON", res, failing, contract.MaxFailureTextBytes)
	}
	e.keepHistory(t, outDir, "merge-wal-result-errors-cut.json", run.GetID(), run.GetRunID(), "merge-result-errors-cut")
}

// TestRecordReplayHistoriesCarryBounded records merge-wal-carry-bounded.json (alone with
// -run TestRecordReplayHistoriesCarryBounded): the first run of a two-shard MergeWal on the
// merge-carry-bounded path that continues as new after one pass, with the shard that sorts
// last failed by a long error, so its carry holds that error cut to contract.MaxCarryErrorBytes.
func TestRecordReplayHistoriesCarryBounded(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-carry-bounded.json")
	const target = "generic:replay-carry"
	long := "failed for the recording: " + strings.Repeat("a long storage error, ", 40)
	run, failing := e.mergeTwoShards("rec-carry", target, 2, long, contract.MergeWalInput{MaxGenerations: ptr(1), PassesPerWorkflowRun: 1})
	firstRunID := run.GetRunID() // Get follows the chain and moves GetRunID to its last run
	res := e.mergeResult(run, waitLong)
	if res.WorkflowRuns < 2 || res.ShardsFailed != 1 || res.Shards[0].Shard != failing || len(res.Shards[0].Error) > contract.MaxCarryErrorBytes {
		t.Fatalf("result %+v; want a chain of 2 or more runs, the failed shard %s first with its error cut to %d bytes", res, failing, contract.MaxCarryErrorBytes)
	}
	e.keepHistory(t, outDir, "merge-wal-carry-bounded.json", run.GetID(), firstRunID, "")
}

// TestRecordReplayHistoriesCarryJSONBounded records merge-wal-carry-json-bounded.json (alone
// with -run TestRecordReplayHistoriesCarryJSONBounded): the first run of a two-shard MergeWal
// on the merge-carry-json-bounded path that continues as new after one pass, with the shard
// that sorts last failed by a long error of characters JSON escapes, so its carry holds that
// error cut to contract.MaxCarryErrorBytes of JSON.
func TestRecordReplayHistoriesCarryJSONBounded(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-carry-json-bounded.json")
	const target = "generic:replay-carry-json"
	long := "failed for the recording: " + strings.Repeat("<Error><Code>AccessDenied</Code></Error>\n", 20)
	run, failing := e.mergeTwoShards("rec-carry-json", target, 2, long, contract.MergeWalInput{MaxGenerations: ptr(1), PassesPerWorkflowRun: 1})
	firstRunID := run.GetRunID() // Get follows the chain and moves GetRunID to its last run
	res := e.mergeResult(run, waitLong)
	if res.WorkflowRuns < 2 || res.ShardsFailed != 1 || res.Shards[0].Shard != failing || !cutToJSON(res.Shards[0].Error, contract.MaxCarryErrorBytes) {
		t.Fatalf("result %+v; want a chain of 2 or more runs, the failed shard %s first with its error cut to %d bytes of JSON", res, failing, contract.MaxCarryErrorBytes)
	}
	e.keepHistory(t, outDir, "merge-wal-carry-json-bounded.json", run.GetID(), firstRunID, "merge-carry-json-bounded")
}

// TestRecordReplayHistoriesRetriesPassingFailures records
// merge-wal-retries-passing-failures.json (alone with -run
// TestRecordReplayHistoriesRetriesPassingFailures): the second run of a two-shard MergeWal with
// passes_per_run 1 whose shard that sorts last fails every Prepare attempt of the first run
// with a retryable error, so the first run carries it failed; the second run reads the gate
// merge-retries-passing-failures, merges that shard again and it succeeds.
func TestRecordReplayHistoriesRetriesPassingFailures(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-retries-passing-failures.json")
	const target = "generic:replay-retries"
	da, db := e.openDB("rec-retries-a", nil), e.openDB("rec-retries-b", nil)
	e.writeGenerations(e.createStore(da, target), "a", 2, 2)
	e.writeGenerations(e.createStore(db, target), "b", 2, 2)
	failing := max(da.Shard(), db.Shard())
	var failed atomic.Int32
	e.startHarness(harnessOptions{Shared: da, Shards: []*store.DB{da, db}, Register: func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
			// Every attempt of the first Prepare fails (the policy's 5), later ones succeed.
			if p.Shard == failing && failed.Add(1) <= 5 {
				return contract.PrepareResult{}, temporal.NewApplicationError("storage stalled for the recording", contract.ErrTypeInternal)
			}
			return a.Prepare(ctx, p)
		}, activity.RegisterOptions{Name: contract.PrepareActivity, DisableAlreadyRegisteredCheck: true})
	}})
	run := e.startMerge(target, contract.MergeWalInput{MaxGenerations: ptr(1), PassesPerWorkflowRun: 1})
	firstRunID := run.GetRunID() // Get follows the chain and moves GetRunID to its last run
	res := e.mergeResult(run, waitLong)
	if res.ShardsFailed != 0 || res.Reclaimed != 4 {
		t.Fatalf("result %+v; want every shard merged, the failed one by a later run, 4 generations reclaimed", res)
	}
	second := ""
	for _, ev := range e.history(t, run.GetID(), firstRunID) {
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			second = a.GetNewExecutionRunId()
		}
	}
	if second == "" {
		t.Fatal("the first run did not continue as new")
	}
	e.keepHistory(t, outDir, "merge-wal-retries-passing-failures.json", run.GetID(), second, "merge-retries-passing-failures")
}

// cutToJSON reports whether text was cut to at most budget bytes of JSON, escapes included.
func cutToJSON(text string, budget int) bool {
	b, err := json.Marshal(text)
	return err == nil && len(b)-2 <= budget && strings.HasSuffix(text, "…")
}

// TestRecordReplayHistoriesShardsBounded records merge-wal-shards-bounded.json (alone with
// -run TestRecordReplayHistoriesShardsBounded): a two-shard MergeWal on the
// merge-shards-bounded path (its plan holds at most contract.MaxCarriedShards shards), whose
// marker is read in the run's first workflow task.
func TestRecordReplayHistoriesShardsBounded(t *testing.T) {
	e, outDir := recordingEnv(t, "merge-wal-shards-bounded.json")
	const target = "generic:replay-bounded"
	run, _ := e.mergeTwoShards("rec-bounded", target, 1, "", contract.MergeWalInput{})
	res := e.mergeResult(run, waitLong)
	if len(res.Shards) != 2 || res.Reclaimed != 2 || res.ShardsFailed != 0 {
		t.Fatalf("result %+v; want 2 shards merged, 2 generations reclaimed", res)
	}
	e.keepHistory(t, outDir, "merge-wal-shards-bounded.json", run.GetID(), run.GetRunID(), "merge-shards-bounded")
}

// TestRecordReplayHistoriesSweepRoundErrorsCut records sweep-window-round-errors-cut.json
// (alone with -run TestRecordReplayHistoriesSweepRoundErrorsCut): a SweepWindow on the
// sweep-round-errors-cut path whose rollout listing fails every round with a long error of
// characters JSON escapes, so each round records that error cut to
// contract.MaxFailureTextBytes of JSON and the window fails SweepListFailed.
func TestRecordReplayHistoriesSweepRoundErrorsCut(t *testing.T) {
	e, outDir := recordingEnv(t, "sweep-window-round-errors-cut.json")
	db := e.openDB("rec-round-errors", nil)
	long := "failed for the recording: " + strings.Repeat("<Error><Code>AccessDenied</Code></Error>\n", 200)
	e.startHarness(harnessOptions{Shared: db, Register: func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
			if p.Kind == "rollout" {
				return contract.ScanDemandResult{}, temporal.NewNonRetryableApplicationError(long, contract.ErrTypeCorruptData, nil)
			}
			return a.ScanDemand(ctx, p)
		}, activity.RegisterOptions{Name: contract.ScanDemandActivity, DisableAlreadyRegisteredCheck: true})
	}})

	run := e.execute("record/sweep-window-round-errors", contract.SweepWindowWorkflow, contract.SweepWindowInput{Interval: 2 * time.Second, Window: 3 * time.Second})
	var appErr *temporal.ApplicationError
	if err := run.Get(e.ctx(waitLong), nil); !errors.As(err, &appErr) || appErr.Type() != contract.ErrTypeSweepListFailed {
		t.Fatalf("window: %v; want it failed %s", err, contract.ErrTypeSweepListFailed)
	}
	var res contract.SweepWindowResult
	if err := appErr.Details(&res); err != nil || len(res.Recent) == 0 || !cutToJSON(res.Recent[0].Error, contract.MaxFailureTextBytes) {
		t.Fatalf("window result %+v (%v); want its rounds' errors cut to %d bytes of JSON", res, err, contract.MaxFailureTextBytes)
	}
	e.keepHistory(t, outDir, "sweep-window-round-errors-cut.json", run.GetID(), run.GetRunID(), "sweep-round-errors-cut")
}

// TestRecordReplayHistoriesSweepErrorsCut records maintenance-sweep-errors-cut.json (alone
// with -run TestRecordReplayHistoriesSweepErrorsCut): a MaintenanceSweep on the
// sweep-errors-cut path whose StartWorkflows batch fails as a whole with a long error of
// characters JSON escapes, so the skip of its start holds that error cut to
// contract.MaxStartErrorBytes of JSON.
func TestRecordReplayHistoriesSweepErrorsCut(t *testing.T) {
	e, outDir := recordingEnv(t, "maintenance-sweep-errors-cut.json")
	db := e.openDB("rec-sweep-errors", nil)
	e.writeGenerations(e.createStore(db, "generic:sweep-errors"), "s", 3, 2)
	long := "failed for the recording: " + strings.Repeat("<Error><Code>AccessDenied</Code></Error>\n", 20)
	e.startHarness(harnessOptions{Shared: db, Register: func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(context.Context, contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
			return contract.StartWorkflowsResult{}, temporal.NewNonRetryableApplicationError(long, contract.ErrTypeCorruptData, nil)
		}, activity.RegisterOptions{Name: contract.StartWorkflowsActivity, DisableAlreadyRegisteredCheck: true})
	}})

	run := e.execute("record/maintenance-sweep-errors", contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{MergeMinGenerations: 3})
	var res contract.MaintenanceSweepResult
	if err := run.Get(e.ctx(waitLong), &res); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if len(res.Skipped) != 1 || !cutToJSON(res.Skipped[0].Reason, len("start MergeWal failed: ")+contract.MaxStartErrorBytes) {
		t.Fatalf("sweep result %+v; want its one start skipped with the batch's error cut to %d bytes of JSON", res, contract.MaxStartErrorBytes)
	}
	e.keepHistory(t, outDir, "maintenance-sweep-errors-cut.json", run.GetID(), run.GetRunID(), "sweep-errors-cut")
}

// TestRecordReplayHistoriesSweepWindowLongID records sweep-window-long-id.json (alone with
// -run TestRecordReplayHistoriesSweepWindowLongID): a SweepWindow whose workflow ID is 1,000
// bytes, Temporal's limit, on the sweep-reason-bounded path: the reason of the merge it starts
// names the window cut to a bound, so the start passes the merge's input check.
func TestRecordReplayHistoriesSweepWindowLongID(t *testing.T) {
	e, outDir := recordingEnv(t, "sweep-window-long-id.json")
	w := e.startWorker(e.config("rec-window-long"))
	e.writeGenerations(e.createStore(w.DB(), "generic:long-window"), "l", 3, 2)

	id := "record/sweep-window-long-" + strings.Repeat("w", 1000-len("record/sweep-window-long-"))
	run := e.execute(id, contract.SweepWindowWorkflow, contract.SweepWindowInput{
		Sweep: contract.MaintenanceSweepInput{MergeMinGenerations: 3}, Interval: 2 * time.Second, Window: 5 * time.Second,
	})
	var res contract.SweepWindowResult
	if err := run.Get(e.ctx(waitLong), &res); err != nil {
		t.Fatalf("window: %v", err)
	}
	if res.Totals.Started != 1 {
		t.Fatalf("window: %+v, want the merge of generic:long-window started", res)
	}
	e.keepHistory(t, outDir, "sweep-window-long-id.json", run.GetID(), run.GetRunID(), "")
}

// failingPrepare registers the activities with a Prepare that fails shard's passes for good
// with msg.
func failingPrepare(shard, msg string) func(tworker.ActivityRegistry, *activities.Activities) {
	return func(r tworker.ActivityRegistry, a *activities.Activities) {
		activities.Register(r, a)
		r.RegisterActivityWithOptions(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
			if p.Shard == shard {
				return contract.PrepareResult{}, temporal.NewNonRetryableApplicationError(msg, contract.ErrTypeCorruptData, nil)
			}
			return a.Prepare(ctx, p)
		}, activity.RegisterOptions{Name: contract.PrepareActivity, DisableAlreadyRegisteredCheck: true})
	}
}

// keepHistory saves the history of run id/runID as dir/name, checks that it holds a marker of
// the GetVersion change marker ("" = none to check) and that it replays; it returns the
// history's events.
func (e *env) keepHistory(t *testing.T, dir, name, id, runID, marker string) []*historypb.HistoryEvent {
	t.Helper()
	events := e.saveHistory(filepath.Join(dir, name), id, runID)
	t.Logf("%s: %d events", name, len(events))
	if marker != "" && versionMarkers(t, events, marker) == 0 {
		t.Errorf("%s has no %s marker", name, marker)
	}
	replay(t, filepath.Join(dir, name))
	return events
}

// replay replays the histories of files against the current workflow code.
func replay(t *testing.T, files ...string) {
	t.Helper()
	replayer := tworker.NewWorkflowReplayer()
	workflows.Register(replayer)
	for _, f := range files {
		if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
			t.Errorf("replay %s: %v", f, err)
		}
	}
}

// mergeTwoShards opens the DBs prefix-a and prefix-b, writes gens generations of target
// through each (one store, two shards), starts a harness over both whose Prepare fails the
// shard that sorts last with fail ("" = none fails), and starts target's MergeWal with in.
// It returns the run and the shard that sorts last.
func (e *env) mergeTwoShards(prefix, target string, gens int, fail string, in contract.MergeWalInput) (client.WorkflowRun, string) {
	e.t.Helper()
	da, db := e.openDB(prefix+"-a", nil), e.openDB(prefix+"-b", nil)
	e.writeGenerations(e.createStore(da, target), "a", gens, 2)
	e.writeGenerations(e.createStore(db, target), "b", gens, 2)
	last := max(da.Shard(), db.Shard())
	o := harnessOptions{Shared: da, Shards: []*store.DB{da, db}}
	if fail != "" {
		o.Register = failingPrepare(last, fail)
	}
	e.startHarness(o)
	return e.startMerge(target, in), last
}

// versionMarkers counts the GetVersion markers of changeID in a history (a workflow records
// the markers of every gate it passes, so a count of all markers depends on the other gates).
func versionMarkers(t *testing.T, events []*historypb.HistoryEvent, changeID string) int {
	t.Helper()
	n := 0
	for _, ev := range events {
		a := ev.GetMarkerRecordedEventAttributes()
		if a == nil || a.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("version marker without a change id: %v", err)
		}
		if id == changeID {
			n++
		}
	}
	return n
}
