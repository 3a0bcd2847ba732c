package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

const (
	defaultMergeMinGenerations = contract.DefaultSweepMergeMinGenerations
	defaultMaxPendingAge       = contract.DefaultSweepMaxPendingAge
	defaultCompactMinRuns      = contract.DefaultSweepCompactMinRuns
	defaultSweepConcurrency    = contract.DefaultSweepConcurrency
	defaultStartSpacing        = contract.DefaultSweepStartSpacing
	// legacyMaxStarts and legacyStartBatch are the defaults of MaxStarts and StartBatch on
	// the paths before sweepDemandPagesChange (the scan, the single ScanDemand per kind): a
	// run of them replays with the batches it was recorded with.
	legacyMaxStarts  = contract.ScanSweepMaxStarts
	legacyStartBatch = contract.ScanSweepStartBatch
	// maxSkippedListed bounds the skips (and, on the paged path, the starts) a result lists.
	maxSkippedListed = contract.MaxSweepListed
)

// sweepDefaults fills the zero knobs of in with the defaults MaintenanceSweepInput
// documents, MaxStarts and StartBatch with those of the paths before the paged demand
// sweep (legacyStartDefaults).
func sweepDefaults(in contract.MaintenanceSweepInput) contract.MaintenanceSweepInput {
	return legacyStartDefaults(sweepKnobDefaults(in))
}

// legacyStartDefaults fills zero MaxStarts and StartBatch as the paths before
// sweepDemandPagesChange did.
func legacyStartDefaults(in contract.MaintenanceSweepInput) contract.MaintenanceSweepInput {
	if in.MaxStarts <= 0 {
		in.MaxStarts = legacyMaxStarts
	}
	if in.StartBatch <= 0 {
		in.StartBatch = legacyStartBatch
	}
	return in
}

// sweepKnobDefaults fills the zero knobs of in except MaxStarts and StartBatch, whose
// defaults depend on the path (legacyStartDefaults, pagedStartDefaults).
func sweepKnobDefaults(in contract.MaintenanceSweepInput) contract.MaintenanceSweepInput {
	if in.MergeMinGenerations <= 0 {
		in.MergeMinGenerations = defaultMergeMinGenerations
	}
	if in.MaxPendingAge == 0 {
		in.MaxPendingAge = defaultMaxPendingAge
	}
	if in.CompactMinRuns == 0 {
		in.CompactMinRuns = defaultCompactMinRuns
	}
	if in.Concurrency <= 0 {
		in.Concurrency = defaultSweepConcurrency
	}
	if in.StartSpacing == 0 {
		in.StartSpacing = defaultStartSpacing
	}
	if in.ParallelPrepare == nil {
		on := true
		in.ParallelPrepare = &on
	}
	return in
}

// sweepPerKindChange versions the sweep's decision point: each kind is planned and started
// as soon as its own scan returns, instead of after the slowest kind's scan (a 300-store
// rollout scan held up the hot generic store's merge in the incident replay). Runs
// recorded before it replay the old order.
const (
	sweepPerKindChange  = "sweep-per-kind"
	sweepPerKindVersion = workflow.Version(1)
)

// sweepPacedStartsChange versions the pacing of start batches (StartSpacing): runs recorded
// before it launched every batch at once.
const (
	sweepPacedStartsChange  = "sweep-paced-starts"
	sweepPacedStartsVersion = workflow.Version(1)
)

// MaintenanceSweep scans every kind concurrently (one ScanStats activity per kind) and, as
// each kind's scan returns, orders its targets by debt and starts MergeWal / CompactBase for
// those over threshold through the StartWorkflows activity, so the IDs dedupe with every
// other trigger. A slow kind never delays another kind's starts. It never merges anything
// itself.
func MaintenanceSweep(ctx workflow.Context, in contract.MaintenanceSweepInput) (contract.MaintenanceSweepResult, error) {
	if err := checkInput(ctx, in, ""); err != nil {
		return contract.MaintenanceSweepResult{}, err
	}
	in = sweepKnobDefaults(in)
	demandIndex := workflow.GetVersion(ctx, sweepDemandChange, workflow.DefaultVersion, sweepDemandVersion) >= sweepDemandVersion
	if demandIndex && in.Discovery != contract.DiscoveryScan {
		res, err := demandSweep(ctx, in, roundLabel{})
		if err != nil {
			return res, err
		}
		recordMaintenance(ctx, contract.MaintenanceSweepName)
		return res, nil
	}
	perKind := workflow.GetVersion(ctx, sweepPerKindChange, workflow.DefaultVersion, sweepPerKindVersion) >= sweepPerKindVersion
	res, err := scanSweep(ctx, in, perKind, func() bool {
		return workflow.GetVersion(ctx, sweepPacedStartsChange, workflow.DefaultVersion, sweepPacedStartsVersion) >= sweepPacedStartsVersion
	}, roundLabel{})
	if err != nil {
		return res, err
	}
	if demandIndex {
		res.Discovery = contract.DiscoveryScan
		if len(res.ScanErrors) == 0 {
			recordMaintenance(ctx, contract.MaintenanceSweepName)
		}
	}
	return res, nil
}

// scanSweep is one sweep by ScanStats (reading every store's stats): the scans of every
// kind at once, then the starts, planned per kind as each scan returns (perKind) or all
// together once every scan has returned. paced says whether start batches are spaced out;
// it is asked only after the scans were scheduled (where MaintenanceSweep's version marker
// of the pacing sits in its histories). label names the window round, if any.
func scanSweep(ctx workflow.Context, in contract.MaintenanceSweepInput, perKind bool, paced func() bool, label roundLabel) (contract.MaintenanceSweepResult, error) {
	in = legacyStartDefaults(in)
	res := contract.MaintenanceSweepResult{Started: []contract.SweepStart{}, Skipped: []contract.SweepSkip{}}
	logger := workflow.GetLogger(ctx)

	// Step 1. Scan the kinds concurrently.
	futures := make([]workflow.Future, len(target.Kinds))
	for i, k := range target.Kinds {
		scanCtx := workflow.WithActivityOptions(ctx, withQueue(label.options(scanOptions(), string(k)), contract.TaskQueue))
		futures[i] = workflow.ExecuteActivity(scanCtx, contract.ScanStatsActivity,
			contract.ScanStatsParams{Kind: string(k), Concurrency: in.ScanConcurrency})
	}

	// Steps 2 and 3. Decide (most indebted first) and start, in bounded batches. One
	// semaphore bounds the StartWorkflows activities of every kind.
	st := &sweepStarts{in: in, label: label, sem: workflow.NewSemaphore(ctx, int64(in.Concurrency)), wg: workflow.NewWaitGroup(ctx)}
	if paced() && in.StartSpacing > 0 {
		st.pace = workflow.NewSemaphore(ctx, 1)
	}
	kinds := make([]kindSweep, len(target.Kinds))
	if perKind {
		remaining := in.MaxStarts
		sel := workflow.NewSelector(ctx)
		for i, f := range futures {
			sel.AddFuture(f, func(f workflow.Future) {
				var scan contract.ScanStatsResult
				if err := f.Get(ctx, &scan); err != nil {
					kinds[i].scanErr = fmt.Sprintf("%s: %s", target.Kinds[i], errorText(err))
					return
				}
				kinds[i].plan = planSweepWithin(scan.Targets, in, remaining)
				remaining -= len(kinds[i].plan.starts)
				kinds[i].batches = st.launch(ctx, string(target.Kinds[i]), kinds[i].plan, 0)
			})
		}
		for range futures {
			sel.Select(ctx)
		}
	} else {
		// Before sweepPerKindChange: wait for every scan, then plan all kinds together.
		var targets []contract.TargetStats
		for i, f := range futures {
			var scan contract.ScanStatsResult
			if err := f.Get(ctx, &scan); err != nil {
				kinds[i].scanErr = fmt.Sprintf("%s: %s", target.Kinds[i], errorText(err))
				continue
			}
			targets = append(targets, scan.Targets...)
		}
		if countScanErrors(kinds) < len(kinds) {
			kinds[0].plan = planSweep(targets, in)
			kinds[0].batches = st.launch(ctx, "", kinds[0].plan, 0)
		}
	}
	for _, k := range kinds {
		if k.scanErr != "" {
			res.ScanErrors = append(res.ScanErrors, k.scanErr)
		}
	}
	if len(res.ScanErrors) == len(target.Kinds) {
		return res, temporal.NewApplicationError("every kind's scan failed: "+res.ScanErrors[0], contract.ErrTypeScanFailed, res)
	}
	st.wg.Wait(ctx)

	// Report, kind by kind in kind order (most indebted first within a kind).
	addSkip := listSkip(&res)
	for _, k := range kinds {
		res.Scanned += k.plan.scanned
		for _, s := range k.plan.skipped {
			addSkip(s)
		}
	}
	for _, k := range kinds {
		k.batches.report(&res, addSkip)
	}
	logger.Info("Sweep finished.", "scanned", res.Scanned, "started", res.StartedCount(),
		"skipped", len(res.Skipped)+res.SkippedOmitted, "scan_errors", len(res.ScanErrors))
	return res, nil
}

// kindSweep is one kind's part of a sweep.
type kindSweep struct {
	scanErr string
	plan    sweepPlan
	batches *startBatches
}

func countScanErrors(kinds []kindSweep) int {
	n := 0
	for _, k := range kinds {
		if k.scanErr != "" {
			n++
		}
	}
	return n
}

// sweepStarts runs the StartWorkflows batches of one sweep: at most in.Concurrency in
// flight across every kind.
type sweepStarts struct {
	in    contract.MaintenanceSweepInput
	label roundLabel
	sem   workflow.Semaphore
	wg    workflow.WaitGroup
	// pace (nil = unpaced) lets one batch at a time wait for its launch time, in plan order
	// (coroutines acquire in the order they were created, most indebted first): StartSpacing
	// after the previous launch, or, when planned, firstLaunch + launched × StartSpacing
	// (waitTurn, sweep_pacing.go).
	pace        workflow.Semaphore
	planned     bool
	launched    int
	firstLaunch time.Time
	lastLaunch  time.Time
	// priority, when set, is the task-queue priority of the batches (the paged sweep's
	// contract.SweepPriority; nil on the paths before it, whose commands replay unchanged).
	priority *temporal.Priority
}

// startBatches is one plan's starts split into StartWorkflows batches, with their outcomes.
type startBatches struct {
	batches  [][]plannedStart
	outcomes []contract.StartWorkflowsResult
	errs     []error
}

// launch starts one coroutine per batch of plan's starts; st.wg covers them. kind names
// the plan's kind in a window round's summaries ("" = every kind), omitted the qualified
// stores the kind's scan left out (demand discovery).
func (st *sweepStarts) launch(ctx workflow.Context, kind string, plan sweepPlan, omitted int) *startBatches {
	starts := plan.starts
	b := &startBatches{}
	for i := 0; i < len(starts); i += st.in.StartBatch {
		b.batches = append(b.batches, starts[i:min(i+st.in.StartBatch, len(starts))])
	}
	b.outcomes = make([]contract.StartWorkflowsResult, len(b.batches))
	b.errs = make([]error, len(b.batches))
	for i, batch := range b.batches {
		opts := startWorkflowsOptions()
		if st.priority != nil {
			opts.Priority = *st.priority
		}
		if st.label.round > 0 {
			opts.Summary = st.label.batchSummary(kind, plan, omitted, i, len(b.batches), batch)
		}
		startCtx := workflow.WithActivityOptions(ctx, withQueue(opts, contract.TaskQueue))
		st.wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer st.wg.Done()
			if err := st.sem.Acquire(ctx, 1); err != nil {
				b.errs[i] = err
				return
			}
			defer st.sem.Release(1)
			if err := st.waitTurn(ctx); err != nil {
				b.errs[i] = err
				return
			}
			params := contract.StartWorkflowsParams{Starts: make([]contract.StartRequest, len(batch))}
			for j, s := range batch {
				params.Starts[j] = st.label.request(s.req)
			}
			b.errs[i] = workflow.ExecuteActivity(startCtx, contract.StartWorkflowsActivity, params).Get(ctx, &b.outcomes[i])
		})
	}
	return b
}

// report adds every start's outcome to res, in plan order: the first maxSkippedListed
// starts by name, the rest counted in StartedOmitted. b may be nil (no plan).
func (b *startBatches) report(res *contract.MaintenanceSweepResult, addSkip func(contract.SweepSkip)) {
	if b == nil {
		return
	}
	for i, batch := range b.batches {
		for j, s := range batch {
			switch {
			case b.errs[i] != nil:
				addSkip(contract.SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, errorText(b.errs[i]))})
			case j >= len(b.outcomes[i].Outcomes):
				addSkip(contract.SweepSkip{Target: s.req.Target, Reason: "start " + s.req.Workflow + ": no outcome reported"})
			case b.outcomes[i].Outcomes[j].Error != "":
				addSkip(contract.SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, b.outcomes[i].Outcomes[j].Error)})
			default:
				o := b.outcomes[i].Outcomes[j]
				if len(res.Started) >= maxSkippedListed {
					res.StartedOmitted++ // the result stays bounded: counted, not listed
					continue
				}
				res.Started = append(res.Started, contract.SweepStart{
					Target: s.req.Target, Workflow: s.req.Workflow, Trigger: s.req.Trigger, Reason: s.reason,
					WorkflowID: o.WorkflowID, RunID: o.RunID,
				})
			}
		}
	}
}

func withQueue(o workflow.ActivityOptions, queue string) workflow.ActivityOptions {
	o.TaskQueue = queue
	return o
}

type plannedStart struct {
	req    contract.StartRequest
	reason string
}

type sweepPlan struct {
	scanned int
	starts  []plannedStart
	skipped []contract.SweepSkip
	// below counts the stores with debt under every threshold that the plan does not list
	// (demand discovery: ScanDemand returns only candidates).
	below int
}

// sortByDebt orders targets most indebted first: the deepest shard, then total pending,
// then the oldest pending generation, then base runs, then target name. Pure.
func sortByDebt(ts []contract.TargetStats) {
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

// planSweep decides what to start, at most in.MaxStarts. Pure: the same stats give the
// same plan.
func planSweep(all []contract.TargetStats, in contract.MaintenanceSweepInput) sweepPlan {
	return planSweepWithin(all, in, in.MaxStarts)
}

// planSweepWithin is planSweep with room for only maxStarts starts (what earlier kinds of
// the same sweep left of in.MaxStarts). Pure.
func planSweepWithin(all []contract.TargetStats, in contract.MaintenanceSweepInput, maxStarts int) sweepPlan {
	var p sweepPlan
	var ok []contract.TargetStats
	var failed []contract.SweepSkip
	for _, t := range all {
		if t.Error != "" {
			failed = append(failed, contract.SweepSkip{Target: t.Target, Reason: "stats unavailable: " + t.Error})
			continue
		}
		ok = append(ok, t)
	}
	p.scanned = len(ok)
	sortByDebt(ok)
	for _, t := range ok {
		compact := ""
		if in.CompactMinRuns > 0 && t.Runs >= in.CompactMinRuns {
			compact = fmt.Sprintf("%d runs >= %d", t.Runs, in.CompactMinRuns)
		}
		p.add(t.Target, wantStarts(t, compact, in), in, maxStarts)
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].Target < failed[j].Target })
	p.skipped = append(failed, p.skipped...)
	return p
}

// wantStarts is what one target needs: a MergeWal when its debt crosses a trigger
// (mergeTrigger), a CompactBase when compactReason says why. Both discoveries (the scan and
// the demand index) plan through it. Pure.
func wantStarts(t contract.TargetStats, compactReason string, in contract.MaintenanceSweepInput) []plannedStart {
	var wants []plannedStart
	if trigger, reason := mergeTrigger(t, in); reason != "" {
		req := contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: t.Target, Trigger: trigger, Reason: reason}
		// Prepares of different shards overlap their storage round trips; with one
		// pending shard there is nothing to overlap.
		req.ParallelPrepare = in.ParallelPrepare != nil && *in.ParallelPrepare && t.PendingShards > 1
		wants = append(wants, plannedStart{req, reason})
	}
	if compactReason != "" {
		wants = append(wants, plannedStart{contract.StartRequest{Workflow: contract.CompactBaseWorkflow, Target: t.Target,
			Trigger: contract.TriggerSweepRuns, Reason: compactReason}, compactReason})
	}
	return wants
}

// add records target's wanted starts while the plan has room (maxStarts), and why it skips
// the rest or the whole target. Pure.
func (p *sweepPlan) add(target string, wants []plannedStart, in contract.MaintenanceSweepInput, maxStarts int) {
	if len(wants) == 0 {
		p.skipped = append(p.skipped, contract.SweepSkip{Target: target, Reason: "below thresholds"})
		return
	}
	for _, w := range wants {
		if len(p.starts) >= maxStarts {
			p.skipped = append(p.skipped, contract.SweepSkip{Target: target,
				Reason: fmt.Sprintf("%s wanted (%s) but max starts (%d) reached", w.req.Workflow, w.reason, in.MaxStarts)})
			continue
		}
		p.starts = append(p.starts, w)
	}
}

func mergeReason(t contract.TargetStats, in contract.MaintenanceSweepInput) string {
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

// MergeWalTick starts (or attaches to) target's MergeWal and returns. Schedules suffix the
// IDs of the workflows they start with a timestamp, so a schedule cannot start MergeWal
// directly without defeating ID dedupe; it starts this tick, whose StartWorkflows activity
// uses the real MergeWal ID.
func MergeWalTick(ctx workflow.Context, in contract.MergeWalTickInput) (contract.MergeWalTickResult, error) {
	if err := checkInput(ctx, in, ""); err != nil {
		return contract.MergeWalTickResult{}, err
	}
	tgt, err := target.ParseTarget(in.Target)
	if err != nil {
		return contract.MergeWalTickResult{}, invalidInput(err) // Validate parsed it already
	}
	res := contract.MergeWalTickResult{Target: tgt.String(), WorkflowID: contract.MergeWalID(tgt)}
	actx := workflow.WithActivityOptions(ctx, withQueue(startWorkflowsOptions(), contract.TaskQueue))
	var out contract.StartWorkflowsResult
	params := contract.StartWorkflowsParams{Starts: []contract.StartRequest{{Workflow: contract.MergeWalWorkflow, Target: tgt.String(),
		Trigger: contract.TriggerSchedule, Reason: scheduleReason(ctx)}}}
	if err := workflow.ExecuteActivity(actx, contract.StartWorkflowsActivity, params).Get(ctx, &out); err != nil {
		return res, err
	}
	if len(out.Outcomes) != 1 {
		return res, temporal.NewApplicationError("StartWorkflows reported no outcome", contract.ErrTypeStartFailed)
	}
	o := out.Outcomes[0]
	if o.Error != "" {
		return res, temporal.NewApplicationError("start "+res.WorkflowID+": "+o.Error, contract.ErrTypeStartFailed)
	}
	res.WorkflowID, res.RunID = o.WorkflowID, o.RunID
	return res, nil
}

// listSkip returns the function that records a skipped store in res: listed while fewer than
// maxSkippedListed are, counted in SkippedOmitted after that, so the result stays bounded
// however many stores a sweep skips.
func listSkip(res *contract.MaintenanceSweepResult) func(contract.SweepSkip) {
	return func(s contract.SweepSkip) {
		if len(res.Skipped) < maxSkippedListed {
			res.Skipped = append(res.Skipped, s)
		} else {
			res.SkippedOmitted++
		}
	}
}
