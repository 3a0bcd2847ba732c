package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/store"
)

// MaintenanceSweepInput is the sweep's input (the Schedule walkeeper-sweep passes it).
// Zero fields take their defaults.
type MaintenanceSweepInput struct {
	// MergeMinGenerations: start MergeWal for a target with at least this many pending
	// generations in total (default 8).
	MergeMinGenerations int `json:"merge_min_generations,omitempty"`
	// MaxPendingAge: start MergeWal for a target whose oldest pending generation is older,
	// however few there are (default 10m; negative = off).
	MaxPendingAge time.Duration `json:"max_pending_age,omitempty"`
	// CompactMinRuns: start CompactBase for a target with at least this many base runs
	// (default 32; negative = off).
	CompactMinRuns int `json:"compact_min_runs,omitempty"`
	// MaxStarts caps the workflows one sweep starts (default 256); the most indebted targets
	// go first.
	MaxStarts int `json:"max_starts,omitempty"`
	// Concurrency bounds the StartWorkflows activities in flight (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// StartBatch is the number of starts per StartWorkflows activity (default 16).
	StartBatch int `json:"start_batch,omitempty"`
}

// MaintenanceSweepResult reports one sweep.
type MaintenanceSweepResult struct {
	// Scanned counts the stores whose stats were read.
	Scanned int `json:"scanned"`
	// Started lists the workflows started or attached to (the server does not tell which),
	// most indebted target first.
	Started []SweepStart `json:"started"`
	// Skipped lists targets not acted on and why, in debt order (at most maxSkippedListed;
	// SkippedOmitted counts the rest).
	Skipped        []SweepSkip `json:"skipped"`
	SkippedOmitted int         `json:"skipped_omitted,omitempty"`
	// ScanErrors lists kinds whose scan failed as a whole.
	ScanErrors []string `json:"scan_errors,omitempty"`
}

// SweepStart is one workflow the sweep started or attached to.
type SweepStart struct {
	Target     string `json:"target"`
	Workflow   string `json:"workflow"`
	Reason     string `json:"reason"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}

// SweepSkip is one target the sweep did not act on.
type SweepSkip struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
}

const (
	defaultMergeMinGenerations = 8
	defaultMaxPendingAge       = 10 * time.Minute
	defaultCompactMinRuns      = 32
	defaultMaxStarts           = 256
	defaultSweepConcurrency    = 4
	defaultStartBatch          = 16
	maxSkippedListed           = 1000
)

func (in MaintenanceSweepInput) withDefaults() MaintenanceSweepInput {
	if in.MergeMinGenerations <= 0 {
		in.MergeMinGenerations = defaultMergeMinGenerations
	}
	if in.MaxPendingAge == 0 {
		in.MaxPendingAge = defaultMaxPendingAge
	}
	if in.CompactMinRuns == 0 {
		in.CompactMinRuns = defaultCompactMinRuns
	}
	if in.MaxStarts <= 0 {
		in.MaxStarts = defaultMaxStarts
	}
	if in.Concurrency <= 0 {
		in.Concurrency = defaultSweepConcurrency
	}
	if in.StartBatch <= 0 {
		in.StartBatch = defaultStartBatch
	}
	return in
}

// MaintenanceSweep scans every kind concurrently (one ScanStats activity per kind), orders
// the targets by debt and starts MergeWal / CompactBase for those over threshold through
// the StartWorkflows activity, so the IDs dedupe with every other trigger. It never merges
// anything itself.
func MaintenanceSweep(ctx workflow.Context, in MaintenanceSweepInput) (MaintenanceSweepResult, error) {
	in = in.withDefaults()
	res := MaintenanceSweepResult{Started: []SweepStart{}, Skipped: []SweepSkip{}}
	logger := workflow.GetLogger(ctx)

	// Step 1. Scan the kinds concurrently: schedule all three, then collect in kind order.
	scanCtx := workflow.WithActivityOptions(ctx, withQueue(scanOptions(), TaskQueue))
	futures := make([]workflow.Future, len(store.Kinds))
	for i, k := range store.Kinds {
		futures[i] = workflow.ExecuteActivity(scanCtx, ScanStatsActivity, ScanStatsParams{Kind: string(k)})
	}
	var targets []TargetStats
	for i, f := range futures {
		var scan ScanStatsResult
		if err := f.Get(ctx, &scan); err != nil {
			res.ScanErrors = append(res.ScanErrors, fmt.Sprintf("%s: %s", store.Kinds[i], errorText(err)))
			continue
		}
		targets = append(targets, scan.Targets...)
	}
	if len(res.ScanErrors) == len(store.Kinds) {
		return res, temporal.NewApplicationError("every kind's scan failed: "+res.ScanErrors[0], ErrTypeScanFailed, res)
	}

	// Step 2. Decide, most indebted first.
	plan := planSweep(targets, in)
	res.Scanned = plan.scanned
	addSkip := func(s SweepSkip) {
		if len(res.Skipped) < maxSkippedListed {
			res.Skipped = append(res.Skipped, s)
		} else {
			res.SkippedOmitted++
		}
	}
	for _, s := range plan.skipped {
		addSkip(s)
	}

	// Step 3. Start, in bounded batches.
	var batches [][]plannedStart
	for i := 0; i < len(plan.starts); i += in.StartBatch {
		batches = append(batches, plan.starts[i:min(i+in.StartBatch, len(plan.starts))])
	}
	outcomes := make([]StartWorkflowsResult, len(batches))
	errs := make([]error, len(batches))
	startCtx := workflow.WithActivityOptions(ctx, withQueue(startWorkflowsOptions(), TaskQueue))
	sem := workflow.NewSemaphore(ctx, int64(in.Concurrency))
	wg := workflow.NewWaitGroup(ctx)
	for i, batch := range batches {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			if err := sem.Acquire(ctx, 1); err != nil {
				errs[i] = err
				return
			}
			defer sem.Release(1)
			params := StartWorkflowsParams{Starts: make([]StartRequest, len(batch))}
			for j, s := range batch {
				params.Starts[j] = s.req
			}
			errs[i] = workflow.ExecuteActivity(startCtx, StartWorkflowsActivity, params).Get(ctx, &outcomes[i])
		})
	}
	wg.Wait(ctx)

	for i, batch := range batches {
		for j, s := range batch {
			switch {
			case errs[i] != nil:
				addSkip(SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, errorText(errs[i]))})
			case j >= len(outcomes[i].Outcomes):
				addSkip(SweepSkip{Target: s.req.Target, Reason: "start " + s.req.Workflow + ": no outcome reported"})
			case outcomes[i].Outcomes[j].Error != "":
				addSkip(SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, outcomes[i].Outcomes[j].Error)})
			default:
				o := outcomes[i].Outcomes[j]
				res.Started = append(res.Started, SweepStart{
					Target: s.req.Target, Workflow: s.req.Workflow, Reason: s.reason,
					WorkflowID: o.WorkflowID, RunID: o.RunID,
				})
			}
		}
	}
	logger.Info("Sweep finished.", "scanned", res.Scanned, "started", len(res.Started),
		"skipped", len(res.Skipped)+res.SkippedOmitted, "scan_errors", len(res.ScanErrors))
	return res, nil
}

func withQueue(o workflow.ActivityOptions, queue string) workflow.ActivityOptions {
	o.TaskQueue = queue
	return o
}

type plannedStart struct {
	req    StartRequest
	reason string
}

type sweepPlan struct {
	scanned int
	starts  []plannedStart
	skipped []SweepSkip
}

// sortByDebt orders targets most indebted first: the deepest shard, then total pending,
// then the oldest pending generation, then base runs, then target name. Pure.
func sortByDebt(ts []TargetStats) {
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.MaxShardPending != b.MaxShardPending {
			return a.MaxShardPending > b.MaxShardPending
		}
		if a.Pending != b.Pending {
			return a.Pending > b.Pending
		}
		if a.OldestPendingAge != b.OldestPendingAge {
			return a.OldestPendingAge > b.OldestPendingAge
		}
		if a.Runs != b.Runs {
			return a.Runs > b.Runs
		}
		return a.Target < b.Target
	})
}

// planSweep decides what to start. Pure: the same stats give the same plan.
func planSweep(all []TargetStats, in MaintenanceSweepInput) sweepPlan {
	var p sweepPlan
	var ok []TargetStats
	var failed []SweepSkip
	for _, t := range all {
		if t.Error != "" {
			failed = append(failed, SweepSkip{Target: t.Target, Reason: "stats unavailable: " + t.Error})
			continue
		}
		ok = append(ok, t)
	}
	p.scanned = len(ok)
	sortByDebt(ok)
	for _, t := range ok {
		var wants []plannedStart
		if reason := mergeReason(t, in); reason != "" {
			wants = append(wants, plannedStart{StartRequest{Workflow: MergeWalWorkflow, Target: t.Target}, reason})
		}
		if in.CompactMinRuns > 0 && t.Runs >= in.CompactMinRuns {
			wants = append(wants, plannedStart{StartRequest{Workflow: CompactBaseWorkflow, Target: t.Target},
				fmt.Sprintf("%d runs >= %d", t.Runs, in.CompactMinRuns)})
		}
		if len(wants) == 0 {
			p.skipped = append(p.skipped, SweepSkip{Target: t.Target, Reason: "below thresholds"})
			continue
		}
		for _, w := range wants {
			if len(p.starts) >= in.MaxStarts {
				p.skipped = append(p.skipped, SweepSkip{Target: t.Target,
					Reason: fmt.Sprintf("%s wanted (%s) but max starts (%d) reached", w.req.Workflow, w.reason, in.MaxStarts)})
				continue
			}
			p.starts = append(p.starts, w)
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].Target < failed[j].Target })
	p.skipped = append(failed, p.skipped...)
	return p
}

func mergeReason(t TargetStats, in MaintenanceSweepInput) string {
	if t.Pending <= 0 {
		return ""
	}
	if t.Pending >= in.MergeMinGenerations {
		return fmt.Sprintf("%d pending >= %d", t.Pending, in.MergeMinGenerations)
	}
	if in.MaxPendingAge > 0 && t.OldestPendingAge >= in.MaxPendingAge {
		return fmt.Sprintf("oldest pending %s >= %s", t.OldestPendingAge.Round(time.Second), in.MaxPendingAge)
	}
	return ""
}

// MergeWalTickInput is the input of MergeWalTick, the action of per-target schedules.
type MergeWalTickInput struct {
	Target string `json:"target"`
}

// MergeWalTickResult names the MergeWal the tick started or attached to.
type MergeWalTickResult struct {
	Target     string `json:"target"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}

// MergeWalTick starts (or attaches to) target's MergeWal and returns. Schedules suffix the
// IDs of the workflows they start with a timestamp, so a schedule cannot start MergeWal
// directly without defeating ID dedupe; it starts this tick, whose StartWorkflows activity
// uses the real MergeWal ID.
func MergeWalTick(ctx workflow.Context, in MergeWalTickInput) (MergeWalTickResult, error) {
	target, err := store.ParseTarget(in.Target)
	if err != nil {
		return MergeWalTickResult{Target: in.Target}, invalidInput(err)
	}
	res := MergeWalTickResult{Target: target.String(), WorkflowID: MergeWalID(target)}
	actx := workflow.WithActivityOptions(ctx, withQueue(startWorkflowsOptions(), TaskQueue))
	var out StartWorkflowsResult
	params := StartWorkflowsParams{Starts: []StartRequest{{Workflow: MergeWalWorkflow, Target: target.String()}}}
	if err := workflow.ExecuteActivity(actx, StartWorkflowsActivity, params).Get(ctx, &out); err != nil {
		return res, err
	}
	if len(out.Outcomes) != 1 {
		return res, temporal.NewApplicationError("StartWorkflows reported no outcome", ErrTypeStartFailed)
	}
	o := out.Outcomes[0]
	if o.Error != "" {
		return res, temporal.NewApplicationError("start "+res.WorkflowID+": "+o.Error, ErrTypeStartFailed)
	}
	res.WorkflowID, res.RunID = o.WorkflowID, o.RunID
	return res, nil
}
