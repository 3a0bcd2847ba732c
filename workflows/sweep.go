package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// MaintenanceSweep lists every kind's demand index concurrently and, as each kind's pages
// return, starts MergeWal / CompactBase for the stores over threshold, most indebted first,
// through the StartWorkflows activity, so the IDs dedupe with every other trigger.
func MaintenanceSweep(ctx workflow.Context, in contract.MaintenanceSweepInput) (contract.MaintenanceSweepResult, error) {
	if err := checkInput(ctx, in, ""); err != nil {
		return contract.MaintenanceSweepResult{}, err
	}
	res, err := demandSweep(ctx, in.WithDefaults(), roundLabel{})
	if ctx.Err() != nil && gated(ctx, sweepCancelEndsCanceledChange) {
		return res, temporal.NewCanceledError("sweep canceled")
	}
	if err != nil {
		return res, err
	}
	recordMaintenance(ctx, contract.MaintenanceSweepName)
	return res, nil
}

// sweepCancelEndsCanceledChange is the GetVersion change ID of a MaintenanceSweep that ends
// Canceled when it was cancelled, where a listing cut short by the cancel failed it with
// SweepListFailed and a cancel during its starts completed it and recorded a success; only a
// cancelled run records the marker, after its sweep.
const sweepCancelEndsCanceledChange = "sweep-cancel-ends-canceled"

// sweepStarts runs one sweep's StartWorkflows batches, at most in.Concurrency in flight.
type sweepStarts struct {
	in    contract.MaintenanceSweepInput
	label roundLabel
	sem   workflow.Semaphore
	wg    workflow.WaitGroup
	// pace (nil = unpaced) lets one batch at a time wait for its launch time, in plan order
	// (coroutines acquire in the order they were created, most indebted first):
	// firstLaunch + launched × StartSpacing (waitTurn, sweep_pacing.go).
	pace        workflow.Semaphore
	launched    int
	firstLaunch time.Time
}

// startBatches is one plan's starts split into StartWorkflows batches, with their outcomes.
type startBatches struct {
	batches  [][]plannedStart
	outcomes []contract.StartWorkflowsResult
	errs     []error
}

// launch starts one coroutine per batch of plan's starts (st.wg covers them); kind and omitted
// go into a window round's summaries.
func (st *sweepStarts) launch(ctx workflow.Context, kind string, plan sweepPlan, omitted int) *startBatches {
	b := &startBatches{batches: slices.Collect(slices.Chunk(plan.starts, st.in.StartBatch))}
	b.outcomes = make([]contract.StartWorkflowsResult, len(b.batches))
	b.errs = make([]error, len(b.batches))
	for i, batch := range b.batches {
		opts := startWorkflowsOptions()
		opts.Priority = contract.SweepPriority // ahead of the merges' tasks on the shared queue
		if st.label.round > 0 {
			opts.Summary = st.label.batchSummary(kind, plan, omitted, i, len(b.batches), batch)
		}
		startCtx := workflow.WithActivityOptions(ctx, opts)
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

// sweepErrorsCutChange is the GetVersion change ID of a sweep that cuts a whole batch's start
// failure to contract.MaxStartErrorBytes of JSON in the skip of each of its starts, and a
// kind's scan failure to contract.MaxFailureTextBytes of JSON, where it kept both whole; only
// a run with such an error to cut records the marker, at the first.
const sweepErrorsCutChange = "sweep-errors-cut"

// cutSweepError is text cut by cut when the cut changes it and the run is on
// sweepErrorsCutChange, else text.
func cutSweepError(ctx workflow.Context, text string, cut func(string) string) string {
	if c := cut(text); c != text && gated(ctx, sweepErrorsCutChange) {
		return c
	}
	return text
}

// report adds every start's outcome to res, in plan order: the first contract.MaxSweepListed
// starts by name, the rest counted in StartedOmitted.
func (b *startBatches) report(ctx workflow.Context, res *contract.MaintenanceSweepResult) {
	for i, batch := range b.batches {
		failed := ""
		if b.errs[i] != nil {
			failed = cutSweepError(ctx, errorText(b.errs[i]), contract.StartErrorText)
		}
		for j, s := range batch {
			switch {
			case b.errs[i] != nil:
				addSkip(res, contract.SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, failed)})
			case j >= len(b.outcomes[i].Outcomes):
				addSkip(res, contract.SweepSkip{Target: s.req.Target, Reason: "start " + s.req.Workflow + ": no outcome reported"})
			case b.outcomes[i].Outcomes[j].Error != "":
				addSkip(res, contract.SweepSkip{Target: s.req.Target, Reason: fmt.Sprintf("start %s failed: %s", s.req.Workflow, b.outcomes[i].Outcomes[j].Error)})
			default:
				o := b.outcomes[i].Outcomes[j]
				if len(res.Started) >= contract.MaxSweepListed {
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

type plannedStart struct {
	req    contract.StartRequest
	reason string
}

type sweepPlan struct {
	scanned int
	starts  []plannedStart
	skipped []contract.SweepSkip
	// below counts the stores with debt under every threshold that the plan does not list
	// (ScanDemand returns only candidates).
	below int
}

// wantStarts is what one target needs: a MergeWal when its debt crosses a trigger
// (mergeTrigger), a CompactBase when it has a compaction marker and CompactMinRuns > 0. Pure.
func wantStarts(t contract.DemandTarget, in contract.MaintenanceSweepInput) []plannedStart {
	var wants []plannedStart
	if trigger, reason := mergeTrigger(t, in); reason != "" {
		req := contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: t.Target, Trigger: trigger, Reason: reason,
			Pending: t.Pending}
		// Prepares of different shards overlap their storage round trips; with one
		// pending shard there is nothing to overlap.
		req.ParallelPrepare = in.ParallelPrepare != nil && *in.ParallelPrepare && t.PendingShards > 1
		req.Urgent = mergeUrgent(t, in)
		wants = append(wants, plannedStart{req, reason})
	}
	if t.Compact && in.CompactMinRuns > 0 {
		const reason = "compaction marker: base runs >= compact_demand_runs"
		wants = append(wants, plannedStart{contract.StartRequest{Workflow: contract.CompactBaseWorkflow, Target: t.Target,
			Trigger: contract.TriggerSweepRuns, Reason: reason}, reason})
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

// MergeWalTick starts (or attaches to) target's MergeWal and returns: a schedule suffixes the
// IDs it starts with a timestamp, which would defeat MergeWal's ID dedupe.
func MergeWalTick(ctx workflow.Context, in contract.MergeWalTickInput) (contract.MergeWalTickResult, error) {
	tgt, err := checkTargetInput(ctx, in, "", in.Target, nil)
	if err != nil {
		return contract.MergeWalTickResult{}, err
	}
	res := contract.MergeWalTickResult{Target: tgt.String(), WorkflowID: contract.MergeWalID(tgt)}
	actx := workflow.WithActivityOptions(ctx, startWorkflowsOptions())
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

// addSkip records a skipped store in res, listed up to contract.MaxSweepListed and counted
// after that, so the result stays bounded.
func addSkip(res *contract.MaintenanceSweepResult, s contract.SweepSkip) {
	if len(res.Skipped) < contract.MaxSweepListed {
		res.Skipped = append(res.Skipped, s)
	} else {
		res.SkippedOmitted++
	}
}
