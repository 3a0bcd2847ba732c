package workflows

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// fakeStarter records StartWorkflows requests and answers each with its ID.
type fakeStarter struct {
	mu       sync.Mutex
	requests []contract.StartRequest
	batches  int
	fail     map[string]string // target -> error
}

func (s *fakeStarter) start(_ context.Context, p contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	var res contract.StartWorkflowsResult
	for _, r := range p.Starts {
		s.requests = append(s.requests, r)
		t, err := target.ParseTarget(r.Target)
		if err != nil {
			return res, err
		}
		o := contract.StartOutcome{Workflow: r.Workflow, Target: r.Target, RunID: "run-" + r.Target}
		if r.Workflow == contract.MergeWalWorkflow {
			o.WorkflowID = contract.MergeWalID(t)
		} else {
			o.WorkflowID = contract.CompactID(t)
		}
		if msg := s.fail[r.Target]; msg != "" {
			o.Error, o.RunID = msg, ""
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	return res, nil
}

func scanFor(byKind map[string][]contract.TargetStats) func(context.Context, contract.ScanStatsParams) (contract.ScanStatsResult, error) {
	return func(_ context.Context, p contract.ScanStatsParams) (contract.ScanStatsResult, error) {
		return contract.ScanStatsResult{Kind: p.Kind, Targets: byKind[p.Kind]}, nil
	}
}

func byKind(kind string) any {
	return mock.MatchedBy(func(p contract.ScanStatsParams) bool { return p.Kind == kind })
}

func TestMaintenanceSweepOrdersByDebtAndStartsOnlyEligible(t *testing.T) {
	env := newEnv(t)
	stats := map[string][]contract.TargetStats{
		"rollout": {
			{Target: "rollout:calm", Pending: 2, MaxShardPending: 2, OldestPendingAge: time.Minute, Runs: 3},
			{Target: "rollout:deep", Pending: 40, MaxShardPending: 30, Runs: 5, PendingShards: 2},
			{Target: "rollout:broken", Error: "corrupt data: store.json", ErrorType: contract.ErrTypeCorruptData},
		},
		"generic": {
			{Target: "generic:gs", Pending: 12600, MaxShardPending: 12600, OldestPendingAge: 72 * time.Hour, Runs: 40, PendingShards: 1},
			{Target: "generic:old", Pending: 1, MaxShardPending: 1, OldestPendingAge: time.Hour, PendingShards: 1},
			{Target: "generic:empty", Runs: 2},
			{Target: "generic:runs", Runs: 33},
		},
		"datagen": {
			{Target: "datagen:wide", Pending: 40, MaxShardPending: 10, Runs: 1, PendingShards: 4},
			{Target: "datagen:tie-b", Pending: 9, MaxShardPending: 9, Runs: 1, PendingShards: 1},
			{Target: "datagen:tie-a", Pending: 9, MaxShardPending: 9, Runs: 1, PendingShards: 1},
		},
	}
	// The scans return one after another: generic, then rollout, then datagen.
	env.OnActivity(contract.ScanStatsActivity, anyCtx, byKind("generic")).After(time.Second).Return(scanFor(stats))
	env.OnActivity(contract.ScanStatsActivity, anyCtx, byKind("rollout")).After(2 * time.Second).Return(scanFor(stats))
	env.OnActivity(contract.ScanStatsActivity, anyCtx, byKind("datagen")).After(3 * time.Second).Return(scanFor(stats))
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	in := trackInflight(env)

	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Equal(t, 3, in.max[contract.ScanStatsActivity], "the three kinds are scanned concurrently")
	require.Equal(t, 0, in.max[contract.PrepareActivity]+in.max[contract.CommitRoundActivity], "the sweep never merges itself")
	require.Equal(t, 9, res.Scanned)

	// Each kind is started as its scan returns, most indebted first within the kind.
	// Parallel prepare (the default) is asked for where more than one shard is pending.
	requested := []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:gs", Trigger: contract.TriggerSweepCount, Reason: "12600 pending >= 8, oldest pending 72h0m0s"},
		{Workflow: contract.CompactBaseWorkflow, Target: "generic:gs", Trigger: contract.TriggerSweepRuns, Reason: "40 runs >= 32"},
		// 1 pending, but older than 10m
		{Workflow: contract.MergeWalWorkflow, Target: "generic:old", Trigger: contract.TriggerSweepAge, Reason: "oldest pending 1h0m0s >= 10m0s, 1 pending"},
		{Workflow: contract.CompactBaseWorkflow, Target: "generic:runs", Trigger: contract.TriggerSweepRuns, Reason: "33 runs >= 32"},
		{Workflow: contract.MergeWalWorkflow, Target: "rollout:deep", ParallelPrepare: true, Trigger: contract.TriggerSweepCount, Reason: "40 pending >= 8"},
		// shard 10 of 40
		{Workflow: contract.MergeWalWorkflow, Target: "datagen:wide", ParallelPrepare: true, Trigger: contract.TriggerSweepCount, Reason: "40 pending >= 8"},
		// ties broken by name
		{Workflow: contract.MergeWalWorkflow, Target: "datagen:tie-a", Trigger: contract.TriggerSweepCount, Reason: "9 pending >= 8"},
		{Workflow: contract.MergeWalWorkflow, Target: "datagen:tie-b", Trigger: contract.TriggerSweepCount, Reason: "9 pending >= 8"},
	}
	require.Equal(t, requested, starter.requests)
	// The result lists the kinds in kind order (rollout, generic, datagen).
	started := append(append([]contract.StartRequest{requested[4]}, requested[:4]...), requested[5:]...)
	require.Len(t, res.Started, len(started))
	for i, s := range res.Started {
		require.Equal(t, started[i].Target, s.Target)
		require.Equal(t, started[i].Workflow, s.Workflow)
		require.NotEmpty(t, s.WorkflowID)
		require.NotEmpty(t, s.Reason)
	}
	require.Equal(t, "merge-wal/rollout/deep", res.Started[0].WorkflowID)

	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Target] = s.Reason
	}
	require.Contains(t, skipped["rollout:broken"], "stats unavailable")
	require.Equal(t, "below thresholds", skipped["rollout:calm"])
	require.Equal(t, "below thresholds", skipped["generic:empty"])
	require.Len(t, skipped, 3)
}

// A slow kind's scan (300 rollout stores at object-store latency in the incident replay) must
// not hold up the starts of a kind whose scan is back (docs/BENCHMARKS.md finding 5).
func TestMaintenanceSweepStartsEachKindAsItsScanReturns(t *testing.T) {
	stats := map[string][]contract.TargetStats{
		"rollout": {{Target: "rollout:r", Pending: 9, MaxShardPending: 9, PendingShards: 1}},
		"generic": {{Target: "generic:hot", Pending: 80, MaxShardPending: 4, PendingShards: 20}},
	}
	run := func(t *testing.T, before bool, in contract.MaintenanceSweepInput) ([]string, *fakeStarter) {
		env := newEnv(t)
		if before {
			env.OnGetVersion(sweepPerKindChange, workflow.DefaultVersion, sweepPerKindVersion).Return(workflow.DefaultVersion)
		}
		env.OnActivity(contract.ScanStatsActivity, anyCtx, byKind("rollout")).After(10 * time.Minute).Return(scanFor(stats))
		env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(scanFor(stats))
		starter := &fakeStarter{}
		env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
		var done []string
		env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
			if info.ActivityType.Name != contract.RecordMaintenanceActivity {
				done = append(done, info.ActivityType.Name)
			}
		})
		in.Discovery = contract.DiscoveryScan
		env.ExecuteWorkflow(MaintenanceSweep, in)
		require.NoError(t, env.GetWorkflowError())
		return done, starter
	}
	t.Run("before", func(t *testing.T) {
		done, _ := run(t, true, contract.MaintenanceSweepInput{})
		require.Equal(t, []string{contract.ScanStatsActivity, contract.ScanStatsActivity, contract.ScanStatsActivity, contract.StartWorkflowsActivity}, done,
			"every start waited for the slowest scan")
	})
	t.Run("per kind", func(t *testing.T) {
		done, starter := run(t, false, contract.MaintenanceSweepInput{})
		// The generic and datagen scans and the generic start may complete in any order
		// (the test environment runs activities concurrently); what matters is that a start
		// completed before the slow rollout scan, which is the last scan to complete.
		require.ElementsMatch(t, []string{contract.ScanStatsActivity, contract.ScanStatsActivity, contract.ScanStatsActivity, contract.StartWorkflowsActivity, contract.StartWorkflowsActivity}, done)
		lastScan := -1
		for i := len(done) - 1; i >= 0; i-- {
			if done[i] == contract.ScanStatsActivity {
				lastScan = i
				break
			}
		}
		require.Less(t, slices.Index(done, contract.StartWorkflowsActivity), lastScan,
			"the generic store's merge starts before the slow rollout scan is back: %v", done)
		require.Equal(t, []contract.StartRequest{
			{Workflow: contract.MergeWalWorkflow, Target: "generic:hot", ParallelPrepare: true, Trigger: contract.TriggerSweepCount, Reason: "80 pending >= 8"},
			{Workflow: contract.MergeWalWorkflow, Target: "rollout:r", Trigger: contract.TriggerSweepCount, Reason: "9 pending >= 8"},
		}, starter.requests)
	})
	t.Run("parallel prepare off", func(t *testing.T) {
		off := false
		_, starter := run(t, false, contract.MaintenanceSweepInput{ParallelPrepare: &off})
		require.False(t, starter.requests[0].ParallelPrepare)
	})
}

// MaxStarts is shared by the kinds of one sweep: a kind whose scan returns later gets what
// the earlier ones left.
func TestMaintenanceSweepMaxStartsSpansKinds(t *testing.T) {
	env := newEnv(t)
	stats := map[string][]contract.TargetStats{
		"generic": {{Target: "generic:a", Pending: 50, MaxShardPending: 50}, {Target: "generic:b", Pending: 40, MaxShardPending: 40}},
		"rollout": {{Target: "rollout:c", Pending: 90, MaxShardPending: 90}, {Target: "rollout:d", Pending: 80, MaxShardPending: 80}},
	}
	env.OnActivity(contract.ScanStatsActivity, anyCtx, byKind("rollout")).After(time.Minute).Return(scanFor(stats))
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(scanFor(stats))
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan, MaxStarts: 3})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, starter.requests, 3)
	require.Equal(t, "rollout:c", starter.requests[2].Target)
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.Target] = s.Reason
	}
	require.Contains(t, reasons["rollout:d"], "max starts (3) reached")
}

func TestMaintenanceSweepBoundsStartsAndBatches(t *testing.T) {
	env := newEnv(t)
	var ts []contract.TargetStats
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ts = append(ts, contract.TargetStats{Target: "generic:" + name, Pending: 100, MaxShardPending: 100})
	}
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(scanFor(map[string][]contract.TargetStats{"generic": ts}))
	starter := &fakeStarter{fail: map[string]string{"generic:b": "frontend unavailable"}}
	// Each batch takes 3 s of workflow time, longer than the 1 s StartSpacing between
	// launches, so the second batch launches while the first runs. (With 1 s each, the
	// batch's end and the next launch fell on the same instant, and their order, hence
	// the overlap, was up to the test environment.)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).After(3 * time.Second).Return(starter.start)
	in := trackInflight(env)

	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan, MaxStarts: 3, StartBatch: 1, Concurrency: 2})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Equal(t, 3, starter.batches)
	require.Equal(t, 2, in.max[contract.StartWorkflowsActivity], "bounded fan-out")
	require.Len(t, res.Started, 2)
	require.Equal(t, "generic:a", res.Started[0].Target)
	require.Equal(t, "generic:c", res.Started[1].Target)
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.Target] = s.Reason
	}
	require.Contains(t, reasons["generic:b"], "frontend unavailable")
	require.Contains(t, reasons["generic:d"], "max starts (3) reached")
	require.Contains(t, reasons["generic:e"], "max starts (3) reached")
}

func TestMaintenanceSweepToleratesOneKindFailing(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(func(_ context.Context, p contract.ScanStatsParams) (contract.ScanStatsResult, error) {
		if p.Kind == "rollout" {
			return contract.ScanStatsResult{}, temporal.NewNonRetryableApplicationError("registry unreadable", contract.ErrTypeCorruptData, nil)
		}
		return contract.ScanStatsResult{Kind: p.Kind}, nil
	})
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.ScanErrors, 1)
	require.Contains(t, res.ScanErrors[0], "rollout")
}

func TestMaintenanceSweepFailsWhenEveryScanFails(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(contract.ScanStatsResult{},
		temporal.NewNonRetryableApplicationError("bucket gone", contract.ErrTypeNotFound, nil))
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, contract.ErrTypeScanFailed, typ)
}

func TestPlanSweepIsDeterministic(t *testing.T) {
	in := sweepDefaults(contract.MaintenanceSweepInput{})
	stats := []contract.TargetStats{
		{Target: "generic:b", Pending: 9, MaxShardPending: 9},
		{Target: "generic:a", Pending: 9, MaxShardPending: 9},
		{Target: "generic:c", Pending: 9, MaxShardPending: 9, OldestPendingAge: time.Minute},
	}
	first := planSweep(append([]contract.TargetStats(nil), stats...), in)
	for i := 0; i < 20; i++ {
		shuffled := []contract.TargetStats{stats[i%3], stats[(i+1)%3], stats[(i+2)%3]}
		require.Equal(t, first, planSweep(shuffled, in))
	}
	require.Equal(t, "generic:c", first.starts[0].req.Target, "older pending first on equal counts")
	require.Equal(t, "generic:a", first.starts[1].req.Target)
}

func TestMergeWalTickStartsTheRealMergeWal(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic:gs"})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MergeWalTickResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "merge-wal/generic/gs", res.WorkflowID)
	require.Equal(t, "run-generic:gs", res.RunID)
	require.Equal(t, []contract.StartRequest{{Workflow: contract.MergeWalWorkflow, Target: "generic:gs",
		Trigger: contract.TriggerSchedule, Reason: "per-target schedule"}}, starter.requests)
}

func TestMergeWalTickBadTarget(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic"})
	typ, nonRetryable := appErrType(env.GetWorkflowError())
	require.Equal(t, contract.ErrTypeInvalidInput, typ)
	require.True(t, nonRetryable)
}

func TestMergeWalTickReportsStartFailure(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{fail: map[string]string{"generic:gs": "namespace not found"}}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic:gs"})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, contract.ErrTypeStartFailed, typ)
}

// A sweep that finds a large debt starts it in batches of StartBatch, one batch at least
// StartSpacing after the previous one, most indebted first; it does not land as one burst.
func TestMaintenanceSweepPacesStartBatches(t *testing.T) {
	env := newEnv(t)
	var generic []contract.TargetStats
	for i := range 5 {
		generic = append(generic, contract.TargetStats{Target: fmt.Sprintf("generic:t%d", i), Pending: 100 - i, MaxShardPending: 100 - i, PendingShards: 1})
	}
	stats := map[string][]contract.TargetStats{"generic": generic}
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(scanFor(stats))
	starter := &fakeStarter{}
	var mu sync.Mutex
	var launched []time.Time
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
		mu.Lock()
		launched = append(launched, env.Now())
		mu.Unlock()
		return starter.start(ctx, p)
	})
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan, StartBatch: 2, StartSpacing: 3 * time.Second})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.Started, 5)
	require.Equal(t, 3, starter.batches, "5 starts in batches of 2")
	require.Len(t, launched, 3)
	for i := 1; i < len(launched); i++ {
		require.GreaterOrEqual(t, launched[i].Sub(launched[i-1]), 3*time.Second, "batch %d", i)
	}
	for i, r := range starter.requests {
		require.Equal(t, fmt.Sprintf("generic:t%d", i), r.Target, "most indebted first")
	}
}

// Sweeps recorded before sweepPacedStartsChange launch every batch at once.
func TestMaintenanceSweepUnpacedBeforePacedStarts(t *testing.T) {
	env := newEnv(t)
	env.OnGetVersion(sweepPacedStartsChange, workflow.DefaultVersion, sweepPacedStartsVersion).Return(workflow.DefaultVersion)
	var generic []contract.TargetStats
	for i := range 4 {
		generic = append(generic, contract.TargetStats{Target: fmt.Sprintf("generic:t%d", i), Pending: 100 - i, MaxShardPending: 100 - i, PendingShards: 1})
	}
	env.OnActivity(contract.ScanStatsActivity, anyCtx, anyArg).Return(scanFor(map[string][]contract.TargetStats{"generic": generic}))
	starter := &fakeStarter{}
	var mu sync.Mutex
	var launched []time.Time
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
		mu.Lock()
		launched = append(launched, env.Now())
		mu.Unlock()
		return starter.start(ctx, p)
	})
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{Discovery: contract.DiscoveryScan, StartBatch: 1, StartSpacing: time.Minute})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, launched, 4)
	require.Less(t, launched[3].Sub(launched[0]), time.Minute)
}
