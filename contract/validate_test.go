package contract

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/target"
)

// boundCase is one input and the field its Validate must name ("" = valid).
type boundCase struct {
	name  string
	in    interface{ Validate() error }
	field string
}

func requireBounds(t *testing.T, tables ...[]boundCase) {
	t.Helper()
	for _, c := range slices.Concat(tables...) {
		t.Run(c.name, func(t *testing.T) {
			err := c.in.Validate()
			if c.field == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "invalid input: "+c.field+": "), "got %q, want field %s", err, c.field)
			require.ErrorIs(t, err, target.ErrInvalidInput, "every layer maps it as invalid input")
		})
	}
}

// changed returns a builder of base with one change made, for a table of inputs.
func changed[T any](base T) func(mod func(*T)) T {
	return func(mod func(*T)) T {
		in := base
		mod(&in)
		return in
	}
}

// limits is the four cases of a bounded setting: valid at its floor and its ceiling, naming
// field at below and one past the ceiling.
func limits[T interface{ Validate() error }, V int | int64 | time.Duration | float64](
	name, field string, in func(func(*T)) T, set func(*T, V), floor, below, ceiling V) []boundCase {
	at := func(v V) T { return in(func(x *T) { set(x, v) }) }
	return []boundCase{
		{name + " floor", at(floor), ""},
		{name + " below", at(below), field},
		{name + " ceiling", at(ceiling), ""},
		{name + " above", at(ceiling + 1), field},
	}
}

func TestMergeWalInputBounds(t *testing.T) {
	m := changed(MergeWalInput{Target: "generic:gs"})
	requireBounds(t, []boundCase{
		{"defaults", m(func(*MergeWalInput) {}), ""},
		{"target missing", m(func(in *MergeWalInput) { in.Target = "" }), "target"},
		{"target kind", m(func(in *MergeWalInput) { in.Target = "bogus:gs" }), "target"},
		{"target name", m(func(in *MergeWalInput) { in.Target = "generic:a/b" }), "target"},
		{"generations no cap", m(func(in *MergeWalInput) { in.MaxGenerations = new(0) }), ""},
		{"bytes no cap", m(func(in *MergeWalInput) { in.MaxBytes = new(int64(0)) }), ""},
		{"schedule-to-start negative", m(func(in *MergeWalInput) { in.ScheduleToStartTimeout = -time.Second }), "schedule_to_start_timeout"},
		{"slot wait off", m(func(in *MergeWalInput) { in.SlotWaitThreshold = -1 }), ""},
		{"trigger unknown value", m(func(in *MergeWalInput) { in.Trigger = "Count" }), "trigger"},
		{"reason at the ceiling", m(func(in *MergeWalInput) { in.TriggerReason = strings.Repeat("é", MaxTriggerReasonBytes/2) }), ""},
		{"reason above", m(func(in *MergeWalInput) { in.TriggerReason = strings.Repeat("x", MaxTriggerReasonBytes+1) }), "trigger_reason"},
		{"reason control character", m(func(in *MergeWalInput) { in.TriggerReason = "a\x1b[2Jb" }), "trigger_reason"},
		{"reason not UTF-8", m(func(in *MergeWalInput) { in.TriggerReason = "a\xffb" }), "trigger_reason"},
		{"fairness weight negative", m(func(in *MergeWalInput) { in.FairnessWeight = -1 }), "fairness_weight"},
		{"fairness weight NaN", m(func(in *MergeWalInput) { in.FairnessWeight = math.NaN() }), "fairness_weight"},
		{"fairness weight +Inf", m(func(in *MergeWalInput) { in.FairnessWeight = math.Inf(1) }), "fairness_weight"},
		{"fairness weight -Inf", m(func(in *MergeWalInput) { in.FairnessWeight = math.Inf(-1) }), "fairness_weight"},
		{"fairness weight huge", m(func(in *MergeWalInput) { in.FairnessWeight = math.MaxFloat64 }), "fairness_weight"},
		{"fairness weight tiny", m(func(in *MergeWalInput) { in.FairnessWeight = math.SmallestNonzeroFloat64 }), "fairness_weight"},
		{"urgent", m(func(in *MergeWalInput) { in.Urgent = true }), ""},
	},
		limits("generations", "max_generations", m, func(in *MergeWalInput, v int) { in.MaxGenerations = new(v) }, 1, -1, MaxMergeGenerations),
		limits("bytes", "max_bytes", m, func(in *MergeWalInput, v int64) { in.MaxBytes = new(v) }, MinMergeBytes, MinMergeBytes-1, MaxMergeBytes),
		limits("prepare concurrency", "prepare_concurrency", m, func(in *MergeWalInput, v int) { in.PrepareConcurrency = v }, 1, -1, MaxPrepareConcurrency),
		limits("passes", "max_passes", m, func(in *MergeWalInput, v int) { in.MaxPasses = v }, 1, -1, MaxMergeMaxPasses),
		limits("schedule-to-start", "schedule_to_start_timeout", m, func(in *MergeWalInput, v time.Duration) { in.ScheduleToStartTimeout = v },
			MinScheduleToStartTimeout, MinScheduleToStartTimeout-1, MaxScheduleToStartTimeout),
		limits("slot wait", "slot_wait_threshold", m, func(in *MergeWalInput, v time.Duration) { in.SlotWaitThreshold = v },
			MinSlotWaitThreshold, MinSlotWaitThreshold-1, MaxSlotWaitThreshold),
		limits("prepare timeout", "prepare_timeout", m, func(in *MergeWalInput, v time.Duration) { in.PrepareTimeout = v },
			MinPrepareTimeout, MinPrepareTimeout-1, MaxPrepareTimeout),
		limits("passes per run", "passes_per_run", m, func(in *MergeWalInput, v int) { in.PassesPerWorkflowRun = v }, 1, -1, MaxPassesPerWorkflowRun),
		limits("shards per commit", "max_shards_per_commit", m, func(in *MergeWalInput, v int) { in.MaxShardsPerCommit = v }, 1, -1, MaxRoundShards),
		limits("fairness weight", "fairness_weight", m, func(in *MergeWalInput, v float64) { in.FairnessWeight = v },
			MinFairnessWeight, MinFairnessWeight/2, MaxFairnessWeight),
	)
	for _, trig := range Triggers {
		require.NoError(t, m(func(in *MergeWalInput) { in.Trigger = trig }).Validate(), trig)
	}
}

func TestMergeWalCarryBounds(t *testing.T) {
	c := func(mod func(*MergeWalCarry)) MergeWalInput {
		carry := MergeWalCarry{WorkflowRuns: 1, PendingAtStart: 9, Shards: []ShardMergeResult{
			{Shard: "0f3c2a9e-7a1b-5c4d-9e8f-0123456789ab", Passes: 3, Reclaimed: 24, Pending: 5},
			{Shard: "default", Finished: true, Error: "prepare: corrupt\nmore", ErrorType: ErrTypeCorruptData, Permanent: true},
		}}
		mod(&carry)
		return MergeWalInput{Target: "generic:gs", MaxPasses: 3, Carry: &carry}
	}
	requireBounds(t, []boundCase{
		{"valid", c(func(*MergeWalCarry) {}), ""},
		{"runs below", c(func(x *MergeWalCarry) { x.WorkflowRuns = 0 }), "carry.runs"},
		{"runs above", c(func(x *MergeWalCarry) { x.WorkflowRuns = MaxCarriedRuns + 1 }), "carry.runs"},
		{"pending at start negative", c(func(x *MergeWalCarry) { x.PendingAtStart = -1 }), "carry.pending_at_start"},
		{"actions negative", c(func(x *MergeWalCarry) { x.Actions = -1 }), "carry.actions"},
		{"actions beyond any chain", c(func(x *MergeWalCarry) { x.Actions = MaxCarriedActions + 1 }), "carry.actions"},
		{"too many shards", c(func(x *MergeWalCarry) {
			x.Shards = make([]ShardMergeResult, MaxCarriedShards+1)
		}), "carry.shards"},
		{"shard empty", c(func(x *MergeWalCarry) { x.Shards[1].Shard = "" }), "carry.shards[1].shard"},
		{"shard too long", c(func(x *MergeWalCarry) { x.Shards[0].Shard = strings.Repeat("a", maxShardIDBytes+1) }), "carry.shards[0].shard"},
		{"shard a path", c(func(x *MergeWalCarry) { x.Shards[0].Shard = "a/b" }), "carry.shards[0].shard"},
		{"shard a traversal", c(func(x *MergeWalCarry) { x.Shards[0].Shard = "a..b" }), "carry.shards[0].shard"},
		{"shard twice", c(func(x *MergeWalCarry) { x.Shards[1].Shard = x.Shards[0].Shard }), "carry.shards[1].shard"},
		{"passes at max passes", c(func(x *MergeWalCarry) { x.Shards[0].Passes = 3 }), ""},
		{"passes over max passes", c(func(x *MergeWalCarry) { x.Shards[0].Passes = 4 }), "carry.shards[0].passes"},
		{"reclaimed negative", c(func(x *MergeWalCarry) { x.Shards[0].Reclaimed = -1 }), "carry.shards[0].reclaimed"},
		{"pending negative", c(func(x *MergeWalCarry) { x.Shards[0].Pending = -1 }), "carry.shards[0].pending"},
		{"restarts negative", c(func(x *MergeWalCarry) { x.Shards[0].Restarts = -1 }), "carry.shards[0].restarts"},
		{"bytes negative", c(func(x *MergeWalCarry) { x.Shards[0].BytesMerged = -1 }), "carry.shards[0].bytes_merged"},
		{"error too long", c(func(x *MergeWalCarry) { x.Shards[1].Error = strings.Repeat("e", maxCarriedErrorBytes+1) }), "carry.shards[1].error"},
		{"error type too long", c(func(x *MergeWalCarry) { x.Shards[1].ErrorType = strings.Repeat("T", maxErrorTypeBytes+1) }), "carry.shards[1].error_type"},
	})
}

func TestMergeWalTickInputBounds(t *testing.T) {
	requireBounds(t, []boundCase{
		{"valid", MergeWalTickInput{Target: "rollout:r1"}, ""},
		{"missing", MergeWalTickInput{}, "target"},
		{"reserved name", MergeWalTickInput{Target: "generic:_stats"}, "target"},
	})
}

func TestCompactBaseInputBounds(t *testing.T) {
	c := changed(CompactBaseInput{Target: "generic:gs"})
	requireBounds(t, []boundCase{
		{"defaults", c(func(*CompactBaseInput) {}), ""},
		{"target missing", c(func(in *CompactBaseInput) { in.Target = "" }), "target"},
		{"every run", c(func(in *CompactBaseInput) { in.MaxRuns = CompactEveryRun }), ""},
		{"one run", c(func(in *CompactBaseInput) { in.MaxRuns = 1 }), "max_runs"},
		{"bytes negative", c(func(in *CompactBaseInput) { in.MaxBytes = -1 }), "max_bytes"},
		{"trigger", c(func(in *CompactBaseInput) { in.Trigger = TriggerSweepRuns }), ""},
		{"trigger unknown value", c(func(in *CompactBaseInput) { in.Trigger = "nightly" }), "trigger"},
		{"reason above", c(func(in *CompactBaseInput) { in.TriggerReason = strings.Repeat("x", MaxTriggerReasonBytes+1) }), "trigger_reason"},
	},
		limits("runs", "max_runs", c, func(in *CompactBaseInput, v int) { in.MaxRuns = v }, 2, -2, MaxCompactRuns),
		limits("bytes", "max_bytes", c, func(in *CompactBaseInput, v int64) { in.MaxBytes = v }, MinCompactBytes, MinCompactBytes-1, MaxCompactBytes),
		limits("passes", "max_passes", c, func(in *CompactBaseInput, v int) { in.MaxPasses = v }, 1, -1, MaxCompactMaxPasses),
		limits("target runs", "target_runs", c, func(in *CompactBaseInput, v int) { in.TargetRuns = v }, 1, -1, MaxCompactRuns),
	)
}

func TestMaintenanceSweepInputBounds(t *testing.T) {
	s := changed(MaintenanceSweepInput{})
	requireBounds(t, []boundCase{
		{"defaults", s(func(*MaintenanceSweepInput) {}), ""},
		{"pending age off", s(func(in *MaintenanceSweepInput) { in.MaxPendingAge = -1 }), ""},
		{"compact off", s(func(in *MaintenanceSweepInput) { in.CompactMinRuns = -1 }), ""},
		{"compact floor", s(func(in *MaintenanceSweepInput) { in.CompactMinRuns = 1 }), ""},
		{"compact ceiling", s(func(in *MaintenanceSweepInput) { in.CompactMinRuns = MaxSweepCompactMinRuns }), ""},
		{"compact above", s(func(in *MaintenanceSweepInput) { in.CompactMinRuns = MaxSweepCompactMinRuns + 1 }), "compact_min_runs"},
		{"max starts floor", s(func(in *MaintenanceSweepInput) { in.MaxStarts = 1 }), ""},
		{"max starts below", s(func(in *MaintenanceSweepInput) { in.MaxStarts = -1 }), "max_starts"},
		{"max starts within the history bound", s(func(in *MaintenanceSweepInput) { in.MaxStarts, in.StartBatch = 39_000, MaxStartBatch }), ""},
		{"max starts past the history bound", s(func(in *MaintenanceSweepInput) { in.MaxStarts, in.StartBatch = MaxSweepStarts, MaxStartBatch }), "max_starts"},
		{"max starts above", s(func(in *MaintenanceSweepInput) { in.MaxStarts = MaxSweepStarts + 1 }), "max_starts"},
		{"start batch floor", s(func(in *MaintenanceSweepInput) { in.StartBatch, in.MaxStarts = 1, 100 }), ""},
		{"start batch below", s(func(in *MaintenanceSweepInput) { in.StartBatch = -1 }), "start_batch"},
		{"start batch ceiling", s(func(in *MaintenanceSweepInput) { in.StartBatch = MaxStartBatch }), ""},
		{"start batch above", s(func(in *MaintenanceSweepInput) { in.StartBatch = MaxStartBatch + 1 }), "start_batch"},
		{"spacing off", s(func(in *MaintenanceSweepInput) { in.StartSpacing = -1 }), ""},
		// One batch per start: 10,000 starts would pass the history bound.
		{"demand batch of one", s(func(in *MaintenanceSweepInput) { in.StartBatch = 1 }), "max_starts"},
	},
		limits("min generations", "merge_min_generations", s, func(in *MaintenanceSweepInput, v int) { in.MergeMinGenerations = v },
			1, -1, MaxSweepMergeMinGenerations),
		limits("pending age", "max_pending_age", s, func(in *MaintenanceSweepInput, v time.Duration) { in.MaxPendingAge = v },
			MinSweepMaxPendingAge, MinSweepMaxPendingAge-1, MaxSweepMaxPendingAge),
		limits("concurrency", "concurrency", s, func(in *MaintenanceSweepInput, v int) { in.Concurrency = v }, 1, -1, MaxSweepConcurrency),
		limits("spacing", "start_spacing", s, func(in *MaintenanceSweepInput, v time.Duration) { in.StartSpacing = v },
			MinSweepStartSpacing, MinSweepStartSpacing-1, MaxSweepStartSpacing),
	)
}

func TestSweepWindowInputBounds(t *testing.T) {
	w := changed(SweepWindowInput{})
	requireBounds(t, []boundCase{
		{"defaults", w(func(*SweepWindowInput) {}), ""},
		{"interval negative", w(func(in *SweepWindowInput) { in.Interval = -time.Minute }), "interval"},
		{"budget negative", w(func(in *SweepWindowInput) { in.EventBudget = -1 }), "event_budget"},
		{"sweep field", w(func(in *SweepWindowInput) { in.Sweep.Concurrency = MaxSweepConcurrency + 1 }), "sweep.concurrency"},
	},
		limits("interval", "interval", w, func(in *SweepWindowInput, v time.Duration) { in.Interval = v }, MinSweepInterval, 1, MaxSweepInterval),
		limits("window", "window", w, func(in *SweepWindowInput, v time.Duration) { in.Window = v }, MinSweepWindow, MinSweepWindow-1, MaxSweepWindow),
		limits("budget", "event_budget", w, func(in *SweepWindowInput, v int) { in.EventBudget = v },
			MinSweepEventBudget, MinSweepEventBudget-1, MaxSweepEventBudget),
	)
	// The message the contract quotes.
	err := SweepWindowInput{Interval: 1}.Validate()
	require.EqualError(t, err, "invalid input: interval: 1ns is below the floor 1s")
}

func TestSweepWindowCarryBounds(t *testing.T) {
	origin := time.Date(2026, 12, 1, 13, 20, 13, 772784688, time.UTC)
	c := func(mod func(*SweepWindowCarry)) SweepWindowInput {
		carry := SweepWindowCarry{Origin: origin, Ends: origin.Add(40 * time.Second), Runs: 2, LastRecorded: origin,
			Totals: SweepWindowTotals{Rounds: 17, IdleRounds: 15, Started: 2},
			Recent: []SweepRound{
				{Round: 4, At: origin.Add(6 * time.Second), Trigger: SweepRoundInterval, Summary: "round 4: started 1", Started: 1,
					Starts: []SweepStart{{Target: "generic:hot", Workflow: MergeWalWorkflow, Trigger: TriggerSweepCount, WorkflowID: "merge-wal/generic/hot"}}},
				{Round: 5, At: origin.Add(7 * time.Second), Trigger: SweepRoundNow, Started: 1},
			}}
		mod(&carry)
		return SweepWindowInput{Interval: 2 * time.Second, Window: 40 * time.Second, EventBudget: 150, Carry: &carry}
	}
	requireBounds(t, []boundCase{
		{"as recorded", c(func(*SweepWindowCarry) {}), ""},
		{"no origin", c(func(x *SweepWindowCarry) { x.Origin = time.Time{} }), "carry.origin"},
		{"ends before origin", c(func(x *SweepWindowCarry) { x.Ends = origin.Add(-time.Second) }), "carry.ends"},
		{"ends past the window", c(func(x *SweepWindowCarry) { x.Ends = origin.Add(41 * time.Second) }), "carry.ends"},
		{"runs below", c(func(x *SweepWindowCarry) { x.Runs = 0 }), "carry.runs"},
		{"runs above", c(func(x *SweepWindowCarry) { x.Runs = MaxCarriedRuns + 1 }), "carry.runs"},
		{"recorded before origin", c(func(x *SweepWindowCarry) { x.LastRecorded = origin.Add(-time.Second) }), "carry.last_recorded"},
		{"rounds negative", c(func(x *SweepWindowCarry) { x.Totals.Rounds = -1 }), "carry.totals.rounds"},
		{"idle over rounds", c(func(x *SweepWindowCarry) { x.Totals.IdleRounds = 18 }), "carry.totals.idle_rounds"},
		{"failed over the rest", c(func(x *SweepWindowCarry) { x.Totals.FailedRounds = 3 }), "carry.totals.failed_rounds"},
		{"started negative", c(func(x *SweepWindowCarry) { x.Totals.Started = -1 }), "carry.totals.started"},
		{"too many rounds", c(func(x *SweepWindowCarry) {
			x.Recent = make([]SweepRound, MaxSweepRecentRounds+1)
		}), "carry.recent"},
		{"round zero", c(func(x *SweepWindowCarry) { x.Recent[0].Round = 0 }), "carry.recent[0].round"},
		{"round after the last", c(func(x *SweepWindowCarry) { x.Recent[1].Round = 18 }), "carry.recent[1].round"},
		{"round trigger", c(func(x *SweepWindowCarry) { x.Recent[1].Trigger = "cron" }), "carry.recent[1].trigger"},
		{"round summary too long", c(func(x *SweepWindowCarry) { x.Recent[0].Summary = strings.Repeat("s", maxCarriedTextBytes+1) }), "carry.recent[0].summary"},
		{"round started negative", c(func(x *SweepWindowCarry) { x.Recent[0].Started = -1 }), "carry.recent[0].started"},
		{"round too many starts", c(func(x *SweepWindowCarry) {
			x.Recent[0].Starts = make([]SweepStart, MaxSweepRoundStarts+1)
		}), "carry.recent[0].starts"},
		{"start reason too long", c(func(x *SweepWindowCarry) {
			x.Recent[0].Starts[0].Reason = strings.Repeat("r", maxCarriedTextBytes+1)
		}), "carry.recent[0].starts[0].reason"},
	})
}

func TestReconcileDemandInputBounds(t *testing.T) {
	r := changed(ReconcileDemandInput{})
	requireBounds(t, []boundCase{
		{"defaults", r(func(*ReconcileDemandInput) {}), ""},
		{"cursor done", r(func(in *ReconcileDemandInput) { in.Cursor.KindIndex = len(target.Kinds) }), ""},
		{"cursor below", r(func(in *ReconcileDemandInput) { in.Cursor.KindIndex = -1 }), "cursor.kind_index"},
		{"cursor above", r(func(in *ReconcileDemandInput) { in.Cursor.KindIndex = len(target.Kinds) + 1 }), "cursor.kind_index"},
		{"cursor after a name", r(func(in *ReconcileDemandInput) { in.Cursor.After = "s000009" }), ""},
		{"cursor after not a name", r(func(in *ReconcileDemandInput) { in.Cursor.After = "a/../b" }), "cursor.after"},
		{"totals negative", r(func(in *ReconcileDemandInput) { in.Totals.Pages = -1 }), "totals.pages"},
		{"runs below", r(func(in *ReconcileDemandInput) { in.Runs = -1 }), "runs"},
		{"runs above", r(func(in *ReconcileDemandInput) { in.Runs = MaxCarriedRuns + 1 }), "runs"},
		{"problems at the ceiling", r(func(in *ReconcileDemandInput) { in.Problems = make([]StoreProblem, MaxReconcileUnreadable) }), ""},
		{"problems above", r(func(in *ReconcileDemandInput) { in.Problems = make([]StoreProblem, MaxReconcileUnreadable+1) }), "problems"},
		{"problem error too long", r(func(in *ReconcileDemandInput) {
			in.Problems = []StoreProblem{{Target: "generic:x", Error: strings.Repeat("e", maxCarriedErrorBytes+1)}}
		}), "problems[0].error"},
	},
		limits("page", "page_size", r, func(in *ReconcileDemandInput, v int) { in.PageSize = v }, MinReconcilePage, MinReconcilePage-1, MaxReconcilePage),
		limits("concurrency", "concurrency", r, func(in *ReconcileDemandInput, v int) { in.Concurrency = v }, 1, -1, MaxStoreConcurrency),
		limits("pages per run", "pages_per_run", r, func(in *ReconcileDemandInput, v int) { in.PagesPerRun = v }, 1, -1, MaxReconcilePagesPerRun),
	)
}

func TestReconcileDemandCarriedField(t *testing.T) {
	require.Equal(t, "", ReconcileDemandInput{PageSize: 10, Concurrency: 4, PagesPerRun: 2}.CarriedField())
	require.Equal(t, "cursor", ReconcileDemandInput{Cursor: ReconcileCursor{After: "s1"}}.CarriedField())
	require.Equal(t, "totals", ReconcileDemandInput{Totals: ReconcileCounts{Pages: 1}}.CarriedField())
	require.Equal(t, "problems", ReconcileDemandInput{Problems: []StoreProblem{{}}}.CarriedField())
	require.Equal(t, "runs", ReconcileDemandInput{Runs: 2}.CarriedField())
	require.Equal(t, "started_at", ReconcileDemandInput{StartedAt: time.Unix(1, 0)}.CarriedField())
}

// A start helper refuses an input out of bounds before it reaches Temporal, with the error
// the run would fail with (the HTTP API answers it as 400 invalid_input).
func TestStartHelpersRefuseInvalidInput(t *testing.T) {
	tg, err := target.ParseTarget("generic:gs")
	require.NoError(t, err)
	c := &mocks.Client{} // no ExecuteWorkflow expectation: a call would panic
	_, err = StartMergeWal(context.Background(), c, tg, MergeWalInput{MaxPasses: MaxMergeMaxPasses + 1})
	require.ErrorIs(t, err, target.ErrInvalidInput)
	require.True(t, strings.HasPrefix(err.Error(), "invalid input: max_passes: "), err.Error())
	_, err = StartCompactBase(context.Background(), c, tg, CompactBaseInput{Trigger: "bench"})
	require.True(t, errors.Is(err, target.ErrInvalidInput))
	require.True(t, strings.HasPrefix(err.Error(), "invalid input: trigger: "), err.Error())
	c.AssertNotCalled(t, "ExecuteWorkflow")
}

func TestCarriedOnStartError(t *testing.T) {
	err := CarriedOnStartError("carry")
	require.EqualError(t, err, "invalid input: carry: is handed over by continue-as-new only; a start must leave it out")
	require.ErrorIs(t, err, target.ErrInvalidInput)
}

func TestCapShardsListsFailedFirstAndCountsTheRest(t *testing.T) {
	res := MergeWalResult{Shards: []ShardMergeResult{{Shard: "a"}, {Shard: "b", Error: "x"}, {Shard: "c"}, {Shard: "d", Error: "y"}}}
	got := res.CapShards(3)
	require.Equal(t, []ShardMergeResult{{Shard: "b", Error: "x"}, {Shard: "d", Error: "y"}, {Shard: "a"}}, got.Shards)
	require.Equal(t, [2]int{1, 2}, [2]int{got.ShardsOmitted, got.ShardsFailed}, "omitted, failed")
	require.NotNil(t, (MergeWalResult{Shards: []ShardMergeResult{}}).CapShards(3).Shards, "no shards list nil, which encodes as null")
}
