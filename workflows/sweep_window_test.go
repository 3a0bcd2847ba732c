package workflows

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

const testWindowID = "sweep-window-test"

// windowFleet answers ScanDemand: idle, except for the rounds listed in debtAt (by the
// round's index, counted from the generic kind's scans), where generic:hot is over the count
// threshold.
type windowFleet struct {
	mu      sync.Mutex
	scans   map[string]int // kind -> scans so far
	debtAt  map[int]bool   // generic scan number (1-based) -> generic:hot in debt
	failing string         // kind whose listing fails
	failFor int            // its first failFor scans fail (0 = every one)
	failErr string         // their error ("" = a connection reset)

	starter  fakeStarter // the windows' StartWorkflows
	recorded int         // and their RecordMaintenance calls
}

func (f *windowFleet) scan(_ context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scans == nil {
		f.scans = map[string]int{}
	}
	f.scans[p.Kind]++
	if p.Kind == f.failing && (f.failFor == 0 || f.scans[p.Kind] <= f.failFor) {
		return contract.ScanDemandResult{}, errors.New(cmp.Or(f.failErr, "list _demand/"+p.Kind+"/: connection reset"))
	}
	res := contract.ScanDemandResult{Kind: p.Kind}
	if p.Kind == "generic" {
		res.StoresWithDebt = 5 // 5 stores with small debt, below every threshold
		if f.debtAt[f.scans[p.Kind]] {
			res.StoresWithDebt++
			res.Qualified = 1
			res.Targets = []contract.DemandTarget{{Target: "generic:hot", Pending: 12, MaxShardPending: 12, PendingShards: 1}}
		}
	}
	return res, nil
}

func (f *windowFleet) scansOf(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scans[kind]
}

// newWindowEnv is a SweepWindow environment of the window testWindowID over the fleet f.
func newWindowEnv(t *testing.T, f *windowFleet) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: testWindowID})
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(f.scan)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(f.starter.start)
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(func(context.Context, contract.RecordMaintenanceParams) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.recorded++
		return nil
	})
	return env
}

// runWindow runs a window of in to completion and returns its result.
func runWindow(t *testing.T, env *testsuite.TestWorkflowEnvironment, in contract.SweepWindowInput) contract.SweepWindowResult {
	t.Helper()
	env.ExecuteWorkflow(SweepWindow, in)
	return resultOf[contract.SweepWindowResult](t, env)
}

// continuedWindow runs a window of in until it continues as new and returns the next run's
// input.
func continuedWindow(t *testing.T, env *testsuite.TestWorkflowEnvironment, in contract.SweepWindowInput) contract.SweepWindowInput {
	t.Helper()
	env.ExecuteWorkflow(SweepWindow, in)
	return continuedInput[contract.SweepWindowInput](t, env.GetWorkflowError(), contract.SweepWindowWorkflow)
}

// failedWindow runs a window of in until it fails and returns its error and the result it
// carries in the error's details.
func failedWindow(t *testing.T, env *testsuite.TestWorkflowEnvironment, in contract.SweepWindowInput) (*temporal.ApplicationError, contract.SweepWindowResult) {
	t.Helper()
	env.ExecuteWorkflow(SweepWindow, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	var res contract.SweepWindowResult
	require.NoError(t, appErr.Details(&res))
	return appErr, res
}

// A window runs a round at once and then one every interval until the window ends, on
// workflow timers; rounds that start nothing are only counted. Success is recorded at most
// once a minute.
func TestSweepWindowRunsRoundsUntilTheWindowEnds(t *testing.T) {
	f := &windowFleet{}
	env := newWindowEnv(t, f)
	res := runWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 125 * time.Second})

	// Rounds at 0, 10, ..., 120 s: 13, all idle.
	require.Equal(t, contract.SweepWindowTotals{Rounds: 13, IdleRounds: 13}, res.Totals)
	require.Equal(t, 1, res.Runs)
	require.Empty(t, res.Recent)
	require.Equal(t, 13, f.scansOf("generic"))
	require.Equal(t, 13, f.scansOf("rollout"))
	require.Empty(t, f.starter.requests)
	require.Equal(t, 3, f.recorded, "rounds at 0, 60 and 120 s record the sweep's success")
}

// A round that starts something is reported with its skip reasons, and each start's reason
// names the window and the round, so the merge links back to the sweep.
func TestSweepWindowReportsRoundsThatStart(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{3: true}}
	env := newWindowEnv(t, f)
	var details string
	env.RegisterDelayedCallback(func() { // between rounds 4 and 5
		v, err := env.QueryWorkflow("__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		details = md.GetCurrentDetails()
	}, 35*time.Second)
	res := runWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 50 * time.Second})

	// The current details name the starting round, its start and its skip reasons.
	require.Contains(t, details, "4 rounds: 3 idle, 0 failed; 1 workflows started.")
	require.Contains(t, details, "round 3: started 1 (1 sweep-count); skipped 5: 5 below thresholds — MergeWal generic:hot")
	require.Contains(t, details, "Last: round 4: started nothing; skipped 5: 5 below thresholds at ")
	require.Equal(t, contract.SweepWindowTotals{Rounds: 5, IdleRounds: 4, Started: 1}, res.Totals)
	require.Equal(t, []contract.StartRequest{{Workflow: contract.MergeWalWorkflow, Target: "generic:hot",
		Trigger: contract.TriggerSweepCount, Reason: "12 pending >= 8; sweep window " + testWindowID + " round 3", Pending: 12}}, f.starter.requests)
	require.Len(t, res.Recent, 1)
	r := res.Recent[0]
	require.Equal(t, 3, r.Round)
	require.Equal(t, contract.SweepRoundInterval, r.Trigger)
	require.Equal(t, "round 3: started 1 (1 sweep-count); skipped 5: 5 below thresholds", r.Summary)
	require.Equal(t, []contract.SweepStart{{Target: "generic:hot", Workflow: contract.MergeWalWorkflow, Trigger: contract.TriggerSweepCount,
		Reason: "12 pending >= 8", WorkflowID: "merge-wal/generic/hot", RunID: "run-generic:hot"}}, r.Starts)
	require.False(t, r.At.IsZero())
}

// When Temporal suggests it (or the event budget is reached) the run continues as new with
// the window's state; the next run waits for the next slot and carries on to the same end.
func TestSweepWindowContinuesAsNewCarryingItsState(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{1: true}}
	env := newWindowEnv(t, f)
	env.SetCurrentHistoryLength(contract.DefaultSweepEventBudget) // over budget after the first round
	next := continuedWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 40 * time.Second})
	require.NotNil(t, next.Carry)
	c := *next.Carry
	require.Equal(t, 1, c.Runs)
	require.Equal(t, contract.SweepWindowTotals{Rounds: 1, Started: 1}, c.Totals)
	require.Equal(t, 40*time.Second, c.Ends.Sub(c.Origin))
	require.Len(t, c.Recent, 1)
	require.False(t, c.SweepNow)
	require.Equal(t, 10*time.Second, next.Interval)

	// The next run, started where the first one stopped.
	env2 := newWindowEnv(t, f)
	env2.SetStartTime(c.Origin.Add(time.Second))
	env2.SetContinuedExecutionRunID("run-1")
	res := runWindow(t, env2, next)
	// Slots 10, 20, 30 s in the second run: 4 rounds in all, the first one's start kept.
	require.Equal(t, contract.SweepWindowTotals{Rounds: 4, IdleRounds: 3, Started: 1}, res.Totals)
	require.Equal(t, 2, res.Runs)
	require.Len(t, res.Recent, 1)
	require.Equal(t, 1, res.Recent[0].Round)

	// Temporal's suggestion alone also continues as new.
	env3 := newWindowEnv(t, &windowFleet{})
	env3.SetContinueAsNewSuggested(true)
	continuedWindow(t, env3, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 40 * time.Second})
}

// The sweep-now signal runs a round at once, between two slots; the cadence is kept.
// walkeeper-sweep-now carries no payload, and the window never decodes one: a signal with a
// payload of any type or encoding (an operator's `temporal workflow signal --input`), and a
// burst of them, asks for one round at once like an empty one, and the window completes.
func TestSweepWindowSweepNowSignal(t *testing.T) {
	for _, c := range []struct {
		name     string
		payloads []any
		rounds   int
	}{
		// Rounds at 0, 15 s (sweep now), 60, 120 s.
		{"empty", []any{nil}, 4},
		// And at 15 s for the burst: one for its first signal and one for those that arrived
		// while that round ran, never one per signal.
		{"a burst of any payload", []any{"garbage", 42, map[string]any{"round": -1}, []int{1, 2, 3},
			converter.NewRawValue(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/unknown")}, Data: []byte{0xff, 0}})}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &windowFleet{debtAt: map[int]bool{2: true}}
			env := newWindowEnv(t, f)
			env.RegisterDelayedCallback(func() {
				for _, p := range c.payloads {
					env.SignalWorkflow(contract.SweepNowSignal, p)
				}
			}, 15*time.Second)
			res := runWindow(t, env, contract.SweepWindowInput{Interval: time.Minute, Window: 150 * time.Second})
			require.Equal(t, c.rounds, res.Totals.Rounds)
			require.Len(t, res.Recent, 1)
			require.Equal(t, contract.SweepRoundNow, res.Recent[0].Trigger)
			require.True(t, strings.HasPrefix(res.Recent[0].Summary, "round 2 (sweep now): started 1"), res.Recent[0].Summary)
			require.Len(t, f.starter.requests, 1)
			require.Contains(t, f.starter.requests[0].Reason, "round 2")
		})
	}
}

// A round whose listing fails is counted and reported; the window goes on. A window of
// which every round failed fails, non-retryably, with SweepListFailed, and records nothing.
func TestSweepWindowFailedRounds(t *testing.T) {
	f := &windowFleet{failing: "rollout", debtAt: map[int]bool{1: true}}
	env := newWindowEnv(t, f)
	appErr, res := failedWindow(t, env, contract.SweepWindowInput{Interval: 5 * time.Minute, Window: 10 * time.Minute})
	require.Equal(t, contract.ErrTypeSweepListFailed, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "every one of the window's 2 sweep rounds failed")
	require.Zero(t, f.recorded)
	// The other kinds' starts still went out, and the round says both.
	require.Len(t, f.starter.requests, 1)
	require.Equal(t, contract.SweepWindowTotals{Rounds: 2, FailedRounds: 2, Started: 1}, res.Totals)
	require.Contains(t, res.Recent[0].Summary, "started 1 (1 sweep-count)")
	require.Contains(t, res.Recent[0].Summary, "FAILED: ")
	require.Contains(t, res.Recent[0].Error, "connection reset")

	// One good round is enough for the window to complete.
	f2 := &windowFleet{failing: "datagen", failFor: 5} // every attempt of the first round
	env2 := newWindowEnv(t, f2)
	res = runWindow(t, env2, contract.SweepWindowInput{Interval: 5 * time.Minute, Window: 10 * time.Minute})
	require.Equal(t, contract.SweepWindowTotals{Rounds: 2, IdleRounds: 1, FailedRounds: 1}, res.Totals)
	require.Equal(t, 1, f2.recorded)
}

// A failed round's error is carried across continue-as-new (in the round and its summary), so
// the window keeps it within the carry's bound: a longer listing error would fail the
// continued run as invalid input and end the window.
func TestSweepWindowCarriesALongRoundFailureClipped(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	env := newWindowEnv(t, &windowFleet{failing: "rollout", failErr: long})
	env.SetCurrentHistoryLength(contract.DefaultSweepEventBudget) // over budget after the first round
	next := continuedWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 40 * time.Second})
	require.NoError(t, next.Validate(), "the continued run accepts what its predecessor carried")
	require.Len(t, next.Carry.Recent, 1)
	r := next.Carry.Recent[0]
	require.Equal(t, 1, next.Carry.Totals.FailedRounds)
	require.Contains(t, r.Error, "rollout: xxx")
	require.LessOrEqual(t, len(r.Error), contract.MaxFailureTextBytes)
	require.Contains(t, r.Summary, "FAILED: ")
}

// A canceled window (walkeeper schedule pause) ends as canceled between rounds.
func TestSweepWindowCancel(t *testing.T) {
	f := &windowFleet{}
	env := newWindowEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, 25*time.Second)
	env.ExecuteWorkflow(SweepWindow, contract.SweepWindowInput{Interval: 10 * time.Second, Window: time.Hour})
	require.True(t, temporal.IsCanceledError(env.GetWorkflowError()), "got %v", env.GetWorkflowError())
	require.Equal(t, 3, f.scansOf("generic"))
}

// The words of a round and of a start batch: what started, by trigger, and why the rest was
// skipped.
func TestSweepRoundWords(t *testing.T) {
	res := contract.MaintenanceSweepResult{
		Started: []contract.SweepStart{
			{Trigger: contract.TriggerSweepCount}, {Trigger: contract.TriggerSweepAge}, {Trigger: contract.TriggerSweepCount},
		},
		Skipped: []contract.SweepSkip{
			{Target: "generic:a", Reason: "MergeWal wanted (9 pending >= 8) but max starts (3) reached"},
			{Target: "generic:b", Reason: "start MergeWal failed: unavailable"},
		},
		SkippedOmitted: 4, StoresWithDebt: 45, Qualified: 9,
	}
	require.Equal(t, "round 12: started 3 (2 sweep-count, 1 sweep-age); skipped 42: 36 below thresholds, 1 over max starts, 1 start failed, 4 left for the next round",
		roundSummary(12, contract.SweepRoundInterval, res, ""))
	require.Equal(t, "round 1 (sweep now): started nothing", roundSummary(1, contract.SweepRoundNow, contract.MaintenanceSweepResult{}, ""))

	l := roundLabel{window: "w", round: 7}
	starts := []plannedStart{
		{req: contract.StartRequest{Trigger: contract.TriggerSweepAge}}, {req: contract.StartRequest{Trigger: contract.TriggerSweepAge}},
		{req: contract.StartRequest{Trigger: contract.TriggerSweepRuns}},
	}
	plan := sweepPlan{starts: starts, below: 38}
	require.Equal(t, "round 7 generic: start 3 (2 sweep-age, 1 sweep-runs); skipped 41: 38 below thresholds, 3 left for the next round — batch 1/2",
		l.batchSummary("generic", plan, 3, 0, 2, starts[:2]))
	require.Equal(t, "round 7 generic: start batch 2/2 (1)", l.batchSummary("generic", plan, 3, 1, 2, starts[2:]))
	// A page's batches say the page; only the last page says what is left for the next round.
	require.Equal(t, "generic", pageKind("generic", 1))
	require.Equal(t, "round 7 generic page 2: start 1 (1 sweep-age); skipped 7: 7 left for the next round",
		l.batchSummary(pageKind("generic", 2), sweepPlan{starts: starts[:1]}, 7, 0, 1, starts[:1]))
	require.Equal(t, "round 7 rollout: scan demand index", l.options(demandScanOptions(), "rollout").Summary)
	require.Equal(t, "scan demand index", roundLabel{}.options(demandScanOptions(), "rollout").Summary)
	require.Equal(t, "x", roundLabel{}.request(contract.StartRequest{Reason: "x"}).Reason)
}

// A round's activity task lost in delivery runs again after its heartbeat timeout, not its
// start-to-close timeout: each activity of a round heartbeats (or ends sooner), so
// SweepRoundLostTaskDelay bounds how long the round waits for such a task.
func TestSweepRoundLostTaskDelay(t *testing.T) {
	d := SweepRoundLostTaskDelay()
	for name, o := range map[string]workflow.ActivityOptions{
		"ScanDemand": demandScanOptions(), "StartWorkflows": startWorkflowsOptions(), "RecordMaintenance": recordMaintenanceOptions(),
	} {
		noticed := o.StartToCloseTimeout
		if o.HeartbeatTimeout > 0 {
			noticed = min(noticed, o.HeartbeatTimeout)
		}
		if noticed+o.RetryPolicy.InitialInterval > d {
			t.Errorf("%s: a lost task runs again after %s, past SweepRoundLostTaskDelay %s", name, noticed+o.RetryPolicy.InitialInterval, d)
		}
	}
	if d >= startWorkflowsOptions().StartToCloseTimeout {
		t.Errorf("SweepRoundLostTaskDelay %s: a lost StartWorkflows task waits out its start-to-close timeout", d)
	}
}

// TestFindingWindowOfEscapedRoundErrorsFitsItsPayload: a window whose last ten rounds each
// started a merge and failed a listing with a long error of characters JSON escapes (an XML
// error body's '<', '>', '&', control bytes) reports a result, and carries its rounds, in
// under MaxPayloadBytes, where 4 KiB of such text in each round's error and summary encoded
// to over 500 KiB.
func TestFindingWindowOfEscapedRoundErrorsFitsItsPayload(t *testing.T) {
	debt := map[int]bool{}
	for i := range 40 {
		debt[i+1] = true
	}
	escaped := strings.Repeat("<&>\x01", contract.MaxFailureTextBytes)
	env := newWindowEnv(t, &windowFleet{failing: "rollout", failErr: escaped, debtAt: debt})
	_, res := failedWindow(t, env, contract.SweepWindowInput{Interval: time.Minute, Window: 12 * time.Minute})
	require.Len(t, res.Recent, contract.MaxSweepRecentRounds)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("result of %d rounds with escaped errors: %d bytes", len(res.Recent), len(b))
	require.LessOrEqual(t, len(b), contract.MaxPayloadBytes)
	carry, err := json.Marshal(contract.SweepWindowCarry{Totals: res.Totals, Recent: res.Recent})
	require.NoError(t, err)
	require.LessOrEqual(t, len(carry), contract.MaxPayloadBytes)
}
