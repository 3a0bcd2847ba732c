package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// badInput is one input with a field out of bounds and the field its failure must name.
type badInput struct {
	name  string
	in    any
	field string
	// continued runs the workflow as its chain's continue-as-new, so a carry passes the
	// provenance check and its shape is what is refused.
	continued bool
}

// requireRefused runs wf with each bad input and checks that the run was refused naming the
// field (requireRefusedRun).
func requireRefused(t *testing.T, wf any, cases []badInput) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			if c.continued {
				env.SetContinuedExecutionRunID("previous-run")
			}
			requireRefusedRun(t, env, "invalid input: "+c.field+": ", wf, c.in)
		})
	}
}

// requireRefusedRun runs wf with args in env and checks that the run failed at once: a
// non-retryable InvalidInput whose message starts with want, and no activity (local or not)
// ran. It returns the failure.
func requireRefusedRun(t *testing.T, env *testsuite.TestWorkflowEnvironment, want string, wf any, args ...any) *temporal.ApplicationError {
	t.Helper()
	started := trackInflight(env)
	locals := 0
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { locals++ })
	env.ExecuteWorkflow(wf, args...)
	require.True(t, env.IsWorkflowCompleted())
	appErr := requireNonRetryable(t, env, contract.ErrTypeInvalidInput)
	require.True(t, strings.HasPrefix(appErr.Message(), want), "got %q, want %q", appErr.Message(), want)
	require.Empty(t, started.started, "no activity runs for a refused input")
	require.Zero(t, locals, "no local activity runs for a refused input")
	return appErr
}

// changed returns a builder of base with one change made, for a table of inputs.
func changed[T any](base T) func(mod func(*T)) T {
	return func(mod func(*T)) T {
		in := base
		mod(&in)
		return in
	}
}

func validCarry() *contract.MergeWalCarry {
	return &contract.MergeWalCarry{WorkflowRuns: 1, Shards: []contract.ShardMergeResult{{Shard: "a", Passes: 1, Reclaimed: 2}}}
}

func TestMergeWalRefusesEachFieldOutOfBounds(t *testing.T) {
	in := changed(contract.MergeWalInput{Target: "generic:gs"})
	carry := func(mod func(*contract.MergeWalCarry)) contract.MergeWalInput {
		c := validCarry()
		mod(c)
		return contract.MergeWalInput{Target: "generic:gs", Carry: c}
	}
	requireRefused(t, MergeWal, []badInput{
		{"no target", in(func(v *contract.MergeWalInput) { v.Target = "" }), "target", false},
		{"bad target", in(func(v *contract.MergeWalInput) { v.Target = "generic:" + strings.Repeat("x", 200) }), "target", false},
		{"target without a kind", in(func(v *contract.MergeWalInput) { v.Target = "nope" }), "target", false},
		{"unknown kind", in(func(v *contract.MergeWalInput) { v.Target = "bogus:x" }), "target", false},
		{"no store name", in(func(v *contract.MergeWalInput) { v.Target = "generic:" }), "target", false},
		{"a path for a name", in(func(v *contract.MergeWalInput) { v.Target = "generic:a/b" }), "target", false},
		{"a reserved name", in(func(v *contract.MergeWalInput) { v.Target = "generic:_registry" }), "target", false},
		{"generations below", in(func(v *contract.MergeWalInput) { v.MaxGenerations = new(-1) }), "max_generations", false},
		{"generations above", in(func(v *contract.MergeWalInput) { v.MaxGenerations = new(contract.MaxMergeGenerations + 1) }), "max_generations", false},
		{"bytes below", in(func(v *contract.MergeWalInput) { v.MaxBytes = new(int64(1)) }), "max_bytes", false},
		{"bytes above", in(func(v *contract.MergeWalInput) { v.MaxBytes = new(int64(contract.MaxMergeBytes + 1)) }), "max_bytes", false},
		{"prepare concurrency below", in(func(v *contract.MergeWalInput) { v.PrepareConcurrency = -1 }), "prepare_concurrency", false},
		{"prepare concurrency above", in(func(v *contract.MergeWalInput) { v.PrepareConcurrency = contract.MaxPrepareConcurrency + 1 }), "prepare_concurrency", false},
		{"passes below", in(func(v *contract.MergeWalInput) { v.MaxPasses = -1 }), "max_passes", false},
		{"passes above", in(func(v *contract.MergeWalInput) { v.MaxPasses = contract.MaxMergeMaxPasses + 1 }), "max_passes", false},
		{"schedule-to-start below", in(func(v *contract.MergeWalInput) { v.ScheduleToStartTimeout = time.Nanosecond }), "schedule_to_start_timeout", false},
		{"schedule-to-start above", in(func(v *contract.MergeWalInput) { v.ScheduleToStartTimeout = 2 * time.Hour }), "schedule_to_start_timeout", false},
		{"slot wait below", in(func(v *contract.MergeWalInput) { v.SlotWaitThreshold = time.Nanosecond }), "slot_wait_threshold", false},
		{"slot wait above", in(func(v *contract.MergeWalInput) { v.SlotWaitThreshold = 2 * time.Hour }), "slot_wait_threshold", false},
		{"prepare timeout below", in(func(v *contract.MergeWalInput) { v.PrepareTimeout = time.Second }), "prepare_timeout", false},
		{"prepare timeout above", in(func(v *contract.MergeWalInput) { v.PrepareTimeout = 25 * time.Hour }), "prepare_timeout", false},
		{"passes per run below", in(func(v *contract.MergeWalInput) { v.PassesPerWorkflowRun = -1 }), "passes_per_run", false},
		{"passes per run above", in(func(v *contract.MergeWalInput) { v.PassesPerWorkflowRun = contract.MaxPassesPerWorkflowRun + 1 }), "passes_per_run", false},
		{"unknown trigger", in(func(v *contract.MergeWalInput) { v.Trigger = "bench" }), "trigger", false},
		{"reason too long", in(func(v *contract.MergeWalInput) {
			v.TriggerReason = strings.Repeat("x", contract.MaxTriggerReasonBytes+1)
		}), "trigger_reason", false},
		{"reason with a newline", in(func(v *contract.MergeWalInput) { v.TriggerReason = "a\nb" }), "trigger_reason", false},
		{"shards per commit below", in(func(v *contract.MergeWalInput) { v.MaxShardsPerCommit = -1 }), "max_shards_per_commit", false},
		{"shards per commit above", in(func(v *contract.MergeWalInput) { v.MaxShardsPerCommit = contract.MaxRoundShards + 1 }), "max_shards_per_commit", false},
		{"fairness weight above", in(func(v *contract.MergeWalInput) { v.FairnessWeight = contract.MaxFairnessWeight * 2 }), "fairness_weight", false},
		{"carry on a start", contract.MergeWalInput{Target: "generic:gs", Carry: validCarry()}, "carry", false},
		{"carried runs below", carry(func(c *contract.MergeWalCarry) { c.WorkflowRuns = 0 }), "carry.runs", true},
		{"carried shard id", carry(func(c *contract.MergeWalCarry) { c.Shards[0].Shard = "../a" }), "carry.shards[0].shard", true},
		{"carried shard twice", carry(func(c *contract.MergeWalCarry) { c.Shards = append(c.Shards, c.Shards[0]) }), "carry.shards[1].shard", true},
		{"carried passes above", carry(func(c *contract.MergeWalCarry) { c.Shards[0].Passes = contract.DefaultMergeMaxPasses + 1 }), "carry.shards[0].passes", true},
		{"carried reclaimed below", carry(func(c *contract.MergeWalCarry) { c.Shards[0].Reclaimed = -1 }), "carry.shards[0].reclaimed", true},
	})
}

// A run under another store's merge or compaction ID, or under its own store's ID of the other
// workflow, would hold that ID (its triggers attach to the run, the sweep leaves the store out
// as running) while it does something else: a run under such an ID must be its owner.
func TestMergeWalAndCompactBaseRefuseAnotherStoresID(t *testing.T) {
	merge, compact := contract.MergeWalInput{Target: "generic:gs2"}, contract.CompactBaseInput{Target: "generic:gs2"}
	for _, c := range []struct {
		id     string
		wf, in any
	}{
		{"merge-wal/generic/gs", MergeWal, merge},
		{"compact/generic/gs", CompactBase, compact},
		{"compact/generic/gs2", MergeWal, merge},
		{"merge-wal/generic/gs2", CompactBase, compact},
	} {
		t.Run(c.id, func(t *testing.T) {
			env := newEnv(t)
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.id})
			require.Contains(t, requireRefusedRun(t, env, "invalid input: target: ", c.wf, c.in).Message(), c.id)
		})
	}

	// Its own ID, or one outside the merge and compaction IDs, runs.
	for _, id := range []string{"merge-wal/generic/gs2", "merge-by-hand"} {
		env := newEnv(t)
		f := newFakeTable("generic:gs2", 2, map[string]int{"a": 2})
		mockTable(env, f)
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs2"})
		require.Equal(t, 2, mergeResult(t, env).Reclaimed, id)
	}
}

// Values at their bounds run: a merge with every knob at an edge drains its table.
func TestMergeWalRunsAtTheBounds(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 4, "b": 2})
	mockTable(env, f)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{
		Target: "generic:gs", MaxGenerations: new(contract.MaxMergeGenerations), MaxBytes: new(int64(contract.MinMergeBytes)),
		PrepareConcurrency: contract.MaxPrepareConcurrency, ParallelPrepare: true, MaxPasses: contract.MaxMergeMaxPasses,
		ScheduleToStartTimeout: contract.MinScheduleToStartTimeout, SlotWaitThreshold: -1, PrepareTimeout: contract.MinPrepareTimeout,
		PassesPerWorkflowRun: contract.MaxPassesPerWorkflowRun, Trigger: contract.TriggerCLI,
		TriggerReason: strings.Repeat("r", contract.MaxTriggerReasonBytes), MaxShardsPerCommit: 1,
	})
	res := mergeResult(t, env)
	require.Equal(t, 6, res.Reclaimed)
}

// A forged carry that claims a shard finished (failed for good, so it would never be merged
// again) is refused on a start, before any listing, prepare or commit.
func TestMergeWalRefusesAForgedCarry(t *testing.T) {
	const refusal = "invalid input: carry: is handed over by continue-as-new only; a start must leave it out"
	appErr := requireRefusedRun(t, newEnv(t), refusal, MergeWal, contract.MergeWalInput{Target: "generic:gs", Carry: &contract.MergeWalCarry{WorkflowRuns: 1,
		Shards: []contract.ShardMergeResult{{Shard: "a", Finished: true, Error: "commit: corrupt", ErrorType: contract.ErrTypeCorruptData, Permanent: true}}}})
	require.Equal(t, refusal, appErr.Message())
}

// In a real continuation the carry's claim that a shard is finished is checked against the
// store: the run's listing finds it pending and the shard is merged.
func TestMergeWalRechecksACarriedFinishedShard(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:gs", 2, map[string]int{"a": 6})
	f.watermark["a"] = 2 // the previous run merged 2 of 6
	mockTable(env, f)
	env.SetContinuedExecutionRunID("previous-run")
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs", Carry: &contract.MergeWalCarry{WorkflowRuns: 1,
		Shards: []contract.ShardMergeResult{{Shard: "a", Finished: true, Passes: 1, Reclaimed: 2}}}})
	res := mergeResult(t, env)
	a := shardResult(t, res, "a")
	require.Equal(t, 6, a.Reclaimed, "the 4 pending generations are merged despite the claim")
	require.Equal(t, 3, a.Passes)
	require.Len(t, f.calls(&f.commits), 2)
}

// Carried state is trusted only from a continue-as-new: the server's mark of one, not a
// cron run or a retry (which carry the first run's input along), and never a start.
func TestContinuedAsNewOnlyFromContinueAsNew(t *testing.T) {
	for _, c := range []struct {
		name string
		info workflow.Info
		want bool
	}{
		{"start", workflow.Info{Attempt: 1}, false},
		{"continue-as-new", workflow.Info{ContinuedExecutionRunID: "r1", Attempt: 1}, true},
		{"cron run", workflow.Info{ContinuedExecutionRunID: "r1", Attempt: 1, CronSchedule: "* * * * *"}, false},
		{"retry", workflow.Info{ContinuedExecutionRunID: "r1", Attempt: 2}, false},
	} {
		require.Equal(t, c.want, continuedAsNew(&c.info), c.name)
	}
}

func TestCompactBaseRefusesEachFieldOutOfBounds(t *testing.T) {
	in := changed(contract.CompactBaseInput{Target: "generic:gs"})
	requireRefused(t, CompactBase, []badInput{
		{"no target", in(func(v *contract.CompactBaseInput) { v.Target = "" }), "target", false},
		{"target without a kind", in(func(v *contract.CompactBaseInput) { v.Target = "x" }), "target", false},
		{"bad kind", in(func(v *contract.CompactBaseInput) { v.Target = "bogus:gs" }), "target", false},
		{"one run", in(func(v *contract.CompactBaseInput) { v.MaxRuns = 1 }), "max_runs", false},
		{"runs below", in(func(v *contract.CompactBaseInput) { v.MaxRuns = -2 }), "max_runs", false},
		{"runs above", in(func(v *contract.CompactBaseInput) { v.MaxRuns = contract.MaxCompactRuns + 1 }), "max_runs", false},
		{"bytes below", in(func(v *contract.CompactBaseInput) { v.MaxBytes = 1 }), "max_bytes", false},
		{"bytes above", in(func(v *contract.CompactBaseInput) { v.MaxBytes = contract.MaxCompactBytes + 1 }), "max_bytes", false},
		{"passes below", in(func(v *contract.CompactBaseInput) { v.MaxPasses = -3 }), "max_passes", false},
		{"passes above", in(func(v *contract.CompactBaseInput) { v.MaxPasses = contract.MaxCompactMaxPasses + 1 }), "max_passes", false},
		{"target runs below", in(func(v *contract.CompactBaseInput) { v.TargetRuns = -1 }), "target_runs", false},
		{"target runs above", in(func(v *contract.CompactBaseInput) { v.TargetRuns = contract.MaxCompactRuns + 1 }), "target_runs", false},
		{"unknown trigger", in(func(v *contract.CompactBaseInput) { v.Trigger = "cron" }), "trigger", false},
		{"reason too long", in(func(v *contract.CompactBaseInput) {
			v.TriggerReason = strings.Repeat("x", contract.MaxTriggerReasonBytes+1)
		}), "trigger_reason", false},
	})
}

func TestCompactBaseRunsAtTheBounds(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).Return(contract.CompactPassResult{InputRuns: 8, RunsLeft: 1, Committed: true}, nil)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs", MaxRuns: contract.CompactEveryRun,
		MaxBytes: contract.MinCompactBytes, MaxPasses: 1, TargetRuns: contract.MaxCompactRuns, Trigger: contract.TriggerSweepRuns})
	res := resultOf[contract.CompactBaseResult](t, env)
	require.Equal(t, 1, res.Committed)
}

func TestMaintenanceSweepRefusesEachFieldOutOfBounds(t *testing.T) {
	in := changed(contract.MaintenanceSweepInput{})
	requireRefused(t, MaintenanceSweep, []badInput{
		{"min generations below", in(func(v *contract.MaintenanceSweepInput) { v.MergeMinGenerations = -1 }), "merge_min_generations", false},
		{"min generations above", in(func(v *contract.MaintenanceSweepInput) {
			v.MergeMinGenerations = contract.MaxSweepMergeMinGenerations + 1
		}), "merge_min_generations", false},
		{"pending age below", in(func(v *contract.MaintenanceSweepInput) { v.MaxPendingAge = time.Nanosecond }), "max_pending_age", false},
		{"pending age above", in(func(v *contract.MaintenanceSweepInput) { v.MaxPendingAge = contract.MaxSweepMaxPendingAge + 1 }), "max_pending_age", false},
		{"compact runs above", in(func(v *contract.MaintenanceSweepInput) { v.CompactMinRuns = contract.MaxSweepCompactMinRuns + 1 }), "compact_min_runs", false},
		{"max starts below", in(func(v *contract.MaintenanceSweepInput) { v.MaxStarts = -1 }), "max_starts", false},
		{"max starts above", in(func(v *contract.MaintenanceSweepInput) { v.MaxStarts = contract.MaxSweepStarts + 1 }), "max_starts", false},
		{"concurrency below", in(func(v *contract.MaintenanceSweepInput) { v.Concurrency = -1 }), "concurrency", false},
		{"concurrency above", in(func(v *contract.MaintenanceSweepInput) { v.Concurrency = contract.MaxSweepConcurrency + 1 }), "concurrency", false},
		{"start batch below", in(func(v *contract.MaintenanceSweepInput) { v.StartBatch = -1 }), "start_batch", false},
		{"start batch above", in(func(v *contract.MaintenanceSweepInput) { v.StartBatch = contract.MaxStartBatch + 1 }), "start_batch", false},
		{"spacing below", in(func(v *contract.MaintenanceSweepInput) { v.StartSpacing = time.Millisecond }), "start_spacing", false},
		{"spacing above", in(func(v *contract.MaintenanceSweepInput) { v.StartSpacing = 2 * time.Minute }), "start_spacing", false},
		{"history too long", in(func(v *contract.MaintenanceSweepInput) { v.MaxStarts, v.StartBatch = contract.MaxSweepStarts, 1 }), "max_starts", false},
		{"history too long in 625 batches", in(func(v *contract.MaintenanceSweepInput) { v.MaxStarts, v.StartBatch = 10_000, 16 }), "max_starts", false},
	})
}

// idleScanDemand answers every ScanDemand with no debt.
func idleScanDemand(_ context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
	return contract.ScanDemandResult{Kind: p.Kind}, nil
}

func TestMaintenanceSweepRunsAtTheBounds(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(idleScanDemand)
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{MergeMinGenerations: contract.MaxSweepMergeMinGenerations,
		MaxPendingAge: contract.MinSweepMaxPendingAge, CompactMinRuns: -1, MaxStarts: 2 * contract.DefaultSweepMaxStarts,
		Concurrency: contract.MaxSweepConcurrency, StartBatch: contract.MaxStartBatch, StartSpacing: contract.MaxSweepStartSpacing})
	require.NoError(t, env.GetWorkflowError())
}

func TestSweepWindowRefusesEachFieldOutOfBounds(t *testing.T) {
	in := changed(contract.SweepWindowInput{})
	origin := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	carried := func(mod func(*contract.SweepWindowCarry)) contract.SweepWindowInput {
		c := contract.SweepWindowCarry{Origin: origin, Ends: origin.Add(contract.DefaultSweepWindow), Runs: 1,
			Totals: contract.SweepWindowTotals{Rounds: 3, IdleRounds: 2, Started: 1},
			Recent: []contract.SweepRound{{Round: 2, At: origin.Add(time.Minute), Trigger: contract.SweepRoundInterval, Started: 1}}}
		mod(&c)
		return contract.SweepWindowInput{Carry: &c}
	}
	requireRefused(t, SweepWindow, []badInput{
		{"rounds back to back", in(func(v *contract.SweepWindowInput) { v.Interval = 1 }), "interval", false},
		{"negative interval", in(func(v *contract.SweepWindowInput) { v.Interval = -time.Second }), "interval", false},
		{"interval above", in(func(v *contract.SweepWindowInput) { v.Interval = contract.MaxSweepInterval + 1 }), "interval", false},
		{"window below", in(func(v *contract.SweepWindowInput) { v.Window = time.Millisecond }), "window", false},
		{"window above", in(func(v *contract.SweepWindowInput) { v.Window = 25 * time.Hour }), "window", false},
		{"budget below", in(func(v *contract.SweepWindowInput) { v.EventBudget = contract.MinSweepEventBudget - 1 }), "event_budget", false},
		{"budget above", in(func(v *contract.SweepWindowInput) { v.EventBudget = contract.MaxSweepEventBudget + 1 }), "event_budget", false},
		{"sweep start batch above", in(func(v *contract.SweepWindowInput) { v.Sweep.StartBatch = contract.MaxStartBatch + 1 }), "sweep.start_batch", false},
		{"carry on a start", carried(func(*contract.SweepWindowCarry) {}), "carry", false},
		{"carried window too long", carried(func(c *contract.SweepWindowCarry) { c.Ends = origin.Add(100 * 24 * time.Hour) }), "carry.ends", true},
		{"carried origin missing", carried(func(c *contract.SweepWindowCarry) { c.Origin = time.Time{} }), "carry.origin", true},
		{"carried idle rounds above", carried(func(c *contract.SweepWindowCarry) { c.Totals.IdleRounds = 4 }), "carry.totals.idle_rounds", true},
		{"carried failed rounds above", carried(func(c *contract.SweepWindowCarry) { c.Totals.FailedRounds = 2 }), "carry.totals.failed_rounds", true},
		{"carried round unknown", carried(func(c *contract.SweepWindowCarry) { c.Recent[0].Round = 9 }), "carry.recent[0].round", true},
		{"carried rounds too many", carried(func(c *contract.SweepWindowCarry) {
			c.Totals.Rounds = 20
			for i := range contract.MaxSweepRecentRounds {
				c.Recent = append(c.Recent, contract.SweepRound{Round: i + 3, Trigger: contract.SweepRoundNow})
			}
		}), "carry.recent", true},
	})
}

// The smallest cadence still runs: a round at once and one a second until the window ends.
func TestSweepWindowRunsAtTheBounds(t *testing.T) {
	env := newWindowEnv(t, &windowFleet{})
	env.ExecuteWorkflow(SweepWindow, contract.SweepWindowInput{Interval: contract.MinSweepInterval, Window: 3 * time.Second,
		EventBudget: contract.MaxSweepEventBudget})
	res := resultOf[contract.SweepWindowResult](t, env)
	require.Equal(t, contract.SweepWindowTotals{Rounds: 3, IdleRounds: 3}, res.Totals)
}

func TestReconcileDemandRefusesEachFieldOutOfBounds(t *testing.T) {
	in := changed(contract.ReconcileDemandInput{})
	requireRefused(t, ReconcileDemand, []badInput{
		{"page below", in(func(v *contract.ReconcileDemandInput) { v.PageSize = contract.MinReconcilePage - 1 }), "page_size", false},
		{"page above", in(func(v *contract.ReconcileDemandInput) { v.PageSize = contract.MaxReconcilePage + 1 }), "page_size", false},
		{"concurrency below", in(func(v *contract.ReconcileDemandInput) { v.Concurrency = -1 }), "concurrency", false},
		{"concurrency above", in(func(v *contract.ReconcileDemandInput) { v.Concurrency = contract.MaxStoreConcurrency + 1 }), "concurrency", false},
		{"pages per run below", in(func(v *contract.ReconcileDemandInput) { v.PagesPerRun = -1 }), "pages_per_run", false},
		{"pages per run above", in(func(v *contract.ReconcileDemandInput) { v.PagesPerRun = contract.MaxReconcilePagesPerRun + 1 }), "pages_per_run", false},
		{"cursor on a start", in(func(v *contract.ReconcileDemandInput) { v.Cursor.KindIndex = 3 }), "cursor", false},
		{"totals on a start", in(func(v *contract.ReconcileDemandInput) { v.Totals.Stores = 5 }), "totals", false},
		{"runs on a start", in(func(v *contract.ReconcileDemandInput) { v.Runs = 1 }), "runs", false},
		{"start time on a start", in(func(v *contract.ReconcileDemandInput) { v.StartedAt = time.Unix(1, 0) }), "started_at", false},
		{"carried kind index above", in(func(v *contract.ReconcileDemandInput) { v.Cursor.KindIndex = 4 }), "cursor.kind_index", true},
		{"carried cursor not a name", in(func(v *contract.ReconcileDemandInput) { v.Cursor.After = "../x" }), "cursor.after", true},
		{"carried totals below", in(func(v *contract.ReconcileDemandInput) { v.Totals.Missing = -1 }), "totals.missing", true},
		{"carried runs below", in(func(v *contract.ReconcileDemandInput) { v.Runs = -1 }), "runs", true},
		{"carried problems too many", in(func(v *contract.ReconcileDemandInput) {
			v.Problems = make([]contract.StoreProblem, contract.MaxReconcileUnreadable+1)
		}), "problems", true},
	})
}

func TestReconcileDemandRunsAtTheBounds(t *testing.T) {
	env := newEnv(t)
	reg := &fakeRegistry{n: 3}
	env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(reg.page)
	env.ExecuteWorkflow(ReconcileDemand, contract.ReconcileDemandInput{PageSize: contract.MinReconcilePage,
		Concurrency: contract.MaxStoreConcurrency, PagesPerRun: contract.MaxReconcilePagesPerRun})
	res := resultOf[contract.ReconcileDemandResult](t, env)
	require.Equal(t, 3, res.Totals.Pages, "one page per kind")
	for _, c := range reg.calls {
		require.Equal(t, contract.MaxStoreConcurrency, c.Concurrency)
	}
}

func TestMergeWalTickRefusesABadTarget(t *testing.T) {
	requireRefused(t, MergeWalTick, []badInput{
		{"no target", contract.MergeWalTickInput{}, "target", false},
		{"bad name", contract.MergeWalTickInput{Target: "generic:_registry"}, "target", false},
		{"no name", contract.MergeWalTickInput{Target: "generic"}, "target", false},
	})
}

// JSON of the right shape with a value of the wrong type (a string for a count, a number
// beyond int64, an array for the whole input) is refused like a value out of bounds, naming
// the field; the SDK's own decode error was retryable and no InvalidInput.
func TestEveryWorkflowRefusesAValueOfTheWrongType(t *testing.T) {
	type obj = map[string]any
	requireRefused(t, contract.MergeWalWorkflow, []badInput{
		{"target a number", obj{"target": 5}, "target", false},
		{"passes beyond int64", obj{"target": "generic:gs", "max_passes": 1e30}, "max_passes", false},
		{"timeout as text", obj{"target": "generic:gs", "schedule_to_start_timeout": "30s"}, "schedule_to_start_timeout", false},
		{"carried shard a number", obj{"target": "generic:gs", "carry": obj{"runs": 1, "shards": []any{obj{"shard": 7}}}}, "carry.shards.shard", true},
		{"an array", []any{1, 2}, "input", false},
		{"a string", "generic:gs", "input", false},
	})
	requireRefused(t, contract.CompactBaseWorkflow, []badInput{
		{"max runs negative text", obj{"target": "generic:gs", "max_runs": "-1"}, "max_runs", false},
	})
	requireRefused(t, contract.MaintenanceSweepWorkflow, []badInput{
		{"parallel prepare a number", obj{"parallel_prepare": 1}, "parallel_prepare", false},
	})
	requireRefused(t, contract.SweepWindowWorkflow, []badInput{
		{"sweep an array", obj{"sweep": []any{1}}, "sweep", false},
		{"sweep concurrency a float", obj{"sweep": obj{"concurrency": 1.5}}, "sweep.concurrency", false},
		{"interval beyond int64", obj{"interval": 1e19}, "interval", false},
	})
	requireRefused(t, contract.MergeWalTickWorkflow, []badInput{
		{"target an object", obj{"target": obj{}}, "target", false},
	})
	requireRefused(t, contract.ReconcileDemandWorkflow, []badInput{
		{"cursor kind index text", obj{"cursor": obj{"kind_index": "1"}}, "cursor.kind_index", true},
	})
}
