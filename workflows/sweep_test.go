package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/store"
)

// fakeStarter records StartWorkflows requests and answers each with its ID.
type fakeStarter struct {
	mu       sync.Mutex
	requests []StartRequest
	batches  int
	fail     map[string]string // target -> error
}

func (s *fakeStarter) start(_ context.Context, p StartWorkflowsParams) (StartWorkflowsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	var res StartWorkflowsResult
	for _, r := range p.Starts {
		s.requests = append(s.requests, r)
		t, err := store.ParseTarget(r.Target)
		if err != nil {
			return res, err
		}
		o := StartOutcome{Workflow: r.Workflow, Target: r.Target, RunID: "run-" + r.Target}
		if r.Workflow == MergeWalWorkflow {
			o.WorkflowID = MergeWalID(t)
		} else {
			o.WorkflowID = CompactID(t)
		}
		if msg := s.fail[r.Target]; msg != "" {
			o.Error, o.RunID = msg, ""
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	return res, nil
}

func scanFor(byKind map[string][]TargetStats) func(context.Context, ScanStatsParams) (ScanStatsResult, error) {
	return func(_ context.Context, p ScanStatsParams) (ScanStatsResult, error) {
		return ScanStatsResult{Kind: p.Kind, Targets: byKind[p.Kind]}, nil
	}
}

func TestMaintenanceSweepOrdersByDebtAndStartsOnlyEligible(t *testing.T) {
	env := newEnv(t)
	stats := map[string][]TargetStats{
		"rollout": {
			{Target: "rollout:calm", Pending: 2, MaxShardPending: 2, OldestPendingAge: time.Minute, Runs: 3},
			{Target: "rollout:deep", Pending: 40, MaxShardPending: 30, Runs: 5},
			{Target: "rollout:broken", Error: "corrupt data: store.json", ErrorType: ErrTypeCorruptData},
		},
		"generic": {
			{Target: "generic:gs", Pending: 12600, MaxShardPending: 12600, OldestPendingAge: 72 * time.Hour, Runs: 40},
			{Target: "generic:old", Pending: 1, MaxShardPending: 1, OldestPendingAge: time.Hour},
			{Target: "generic:empty", Runs: 2},
			{Target: "generic:runs", Runs: 33},
		},
		"datagen": {
			{Target: "datagen:wide", Pending: 40, MaxShardPending: 10, Runs: 1},
			{Target: "datagen:tie-b", Pending: 9, MaxShardPending: 9, Runs: 1},
			{Target: "datagen:tie-a", Pending: 9, MaxShardPending: 9, Runs: 1},
		},
	}
	env.OnActivity(ScanStatsActivity, anyCtx, anyArg).After(time.Second).Return(scanFor(stats))
	starter := &fakeStarter{}
	env.OnActivity(StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	in := trackInflight(env)

	env.ExecuteWorkflow(MaintenanceSweep, MaintenanceSweepInput{})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Equal(t, 3, in.max[ScanStatsActivity], "the three kinds are scanned concurrently")
	require.Equal(t, 0, in.max[PrepareActivity]+in.max[CommitActivity], "the sweep never merges itself")
	require.Equal(t, 9, res.Scanned)

	want := []StartRequest{
		{MergeWalWorkflow, "generic:gs"},
		{CompactBaseWorkflow, "generic:gs"},
		{MergeWalWorkflow, "rollout:deep"},    // deepest shard 30
		{MergeWalWorkflow, "datagen:wide"},    // shard 10 (40 total, but shallower shards)
		{MergeWalWorkflow, "datagen:tie-a"},   // ties broken by target name
		{MergeWalWorkflow, "datagen:tie-b"},   //
		{MergeWalWorkflow, "generic:old"},     // 1 pending, but older than 10m
		{CompactBaseWorkflow, "generic:runs"}, // 33 runs >= 32
	}
	require.Equal(t, want, starter.requests)
	require.Len(t, res.Started, len(want))
	for i, s := range res.Started {
		require.Equal(t, want[i].Target, s.Target)
		require.Equal(t, want[i].Workflow, s.Workflow)
		require.NotEmpty(t, s.WorkflowID)
		require.NotEmpty(t, s.Reason)
	}
	require.Equal(t, "merge-wal/generic/gs", res.Started[0].WorkflowID)

	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Target] = s.Reason
	}
	require.Contains(t, skipped["rollout:broken"], "stats unavailable")
	require.Equal(t, "below thresholds", skipped["rollout:calm"])
	require.Equal(t, "below thresholds", skipped["generic:empty"])
	require.Len(t, skipped, 3)
}

func TestMaintenanceSweepBoundsStartsAndBatches(t *testing.T) {
	env := newEnv(t)
	var ts []TargetStats
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ts = append(ts, TargetStats{Target: "generic:" + name, Pending: 100, MaxShardPending: 100})
	}
	env.OnActivity(ScanStatsActivity, anyCtx, anyArg).Return(scanFor(map[string][]TargetStats{"generic": ts}))
	starter := &fakeStarter{fail: map[string]string{"generic:b": "frontend unavailable"}}
	env.OnActivity(StartWorkflowsActivity, anyCtx, anyArg).After(time.Second).Return(starter.start)
	in := trackInflight(env)

	env.ExecuteWorkflow(MaintenanceSweep, MaintenanceSweepInput{MaxStarts: 3, StartBatch: 1, Concurrency: 2})
	require.NoError(t, env.GetWorkflowError())
	var res MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Equal(t, 3, starter.batches)
	require.Equal(t, 2, in.max[StartWorkflowsActivity], "bounded fan-out")
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
	env.OnActivity(ScanStatsActivity, anyCtx, anyArg).Return(func(_ context.Context, p ScanStatsParams) (ScanStatsResult, error) {
		if p.Kind == "rollout" {
			return ScanStatsResult{}, temporal.NewNonRetryableApplicationError("registry unreadable", ErrTypeCorruptData, nil)
		}
		return ScanStatsResult{Kind: p.Kind}, nil
	})
	env.ExecuteWorkflow(MaintenanceSweep, MaintenanceSweepInput{})
	require.NoError(t, env.GetWorkflowError())
	var res MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.ScanErrors, 1)
	require.Contains(t, res.ScanErrors[0], "rollout")
}

func TestMaintenanceSweepFailsWhenEveryScanFails(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(ScanStatsActivity, anyCtx, anyArg).Return(ScanStatsResult{},
		temporal.NewNonRetryableApplicationError("bucket gone", ErrTypeNotFound, nil))
	env.ExecuteWorkflow(MaintenanceSweep, MaintenanceSweepInput{})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeScanFailed, typ)
}

func TestPlanSweepIsDeterministic(t *testing.T) {
	in := MaintenanceSweepInput{}.withDefaults()
	stats := []TargetStats{
		{Target: "generic:b", Pending: 9, MaxShardPending: 9},
		{Target: "generic:a", Pending: 9, MaxShardPending: 9},
		{Target: "generic:c", Pending: 9, MaxShardPending: 9, OldestPendingAge: time.Minute},
	}
	first := planSweep(append([]TargetStats(nil), stats...), in)
	for i := 0; i < 20; i++ {
		shuffled := []TargetStats{stats[i%3], stats[(i+1)%3], stats[(i+2)%3]}
		require.Equal(t, first, planSweep(shuffled, in))
	}
	require.Equal(t, "generic:c", first.starts[0].req.Target, "older pending first on equal counts")
	require.Equal(t, "generic:a", first.starts[1].req.Target)
}

func TestMergeWalTickStartsTheRealMergeWal(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{}
	env.OnActivity(StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, MergeWalTickInput{Target: "generic:gs"})
	require.NoError(t, env.GetWorkflowError())
	var res MergeWalTickResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "merge-wal/generic/gs", res.WorkflowID)
	require.Equal(t, "run-generic:gs", res.RunID)
	require.Equal(t, []StartRequest{{MergeWalWorkflow, "generic:gs"}}, starter.requests)
}

func TestMergeWalTickBadTarget(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(MergeWalTick, MergeWalTickInput{Target: "generic"})
	typ, nonRetryable := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeInvalidInput, typ)
	require.True(t, nonRetryable)
}

func TestMergeWalTickReportsStartFailure(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{fail: map[string]string{"generic:gs": "namespace not found"}}
	env.OnActivity(StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, MergeWalTickInput{Target: "generic:gs"})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, ErrTypeStartFailed, typ)
}
