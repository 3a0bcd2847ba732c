package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// kindPages is one kind's part of a paged sweep: the counters of its first page, the plans
// and batches of every page, and why its listing stopped.
type kindPages struct {
	scanErr string
	// first is the first page's counters (every page lists the whole index of the kind:
	// StoresWithDebt and Records are the same on each, Qualified counts from its cursor).
	first contract.ScanDemandResult
	// omitted counts the qualified stores after the last page's candidates.
	omitted int
	plans   []sweepPlan
	batches []*startBatches
	pages   int
}

// demandSweep is one sweep over the demand index, in pages, each kind in its own coroutine: it
// lists up to min(remaining, MaxDemandCandidates) candidates after the previous page's last
// (ages AsOf the sweep's start, so every page orders stores alike), plans and launches the
// page's starts, and lists on until nothing is left, a page is short or starts nothing, or
// contract.SweepPagesPerKind pages; the qualified stores not reached are counted in
// SkippedOmitted. A store whose debt changed between pages is at worst started twice
// (attached) or left to the next sweep. label names the window round, if any.
//
// INVARIANT: the history this adds is at most contract.SweepHistoryBound(kinds, MaxStarts,
// StartBatch) events, checked on input. A kind whose page fails after its retries fails the
// sweep with ErrTypeSweepListFailed once every start already planned went out.
func demandSweep(ctx workflow.Context, in contract.MaintenanceSweepInput, label roundLabel) (contract.MaintenanceSweepResult, error) {
	res := contract.MaintenanceSweepResult{Started: []contract.SweepStart{}, Skipped: []contract.SweepSkip{}}
	asOf := workflow.Now(ctx)
	st := &sweepStarts{in: in, label: label, sem: workflow.NewSemaphore(ctx, int64(in.Concurrency)), wg: workflow.NewWaitGroup(ctx)}
	if in.StartSpacing > 0 {
		st.pace = workflow.NewSemaphore(ctx, 1)
	}
	kinds := make([]kindPages, len(target.Kinds))
	remaining := in.MaxStarts
	maxPages := contract.SweepPagesPerKind(in.MaxStarts)
	listed := workflow.NewWaitGroup(ctx)
	for i, k := range target.Kinds {
		kp := &kinds[i]
		listed.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer listed.Done()
			opts := label.options(demandScanOptions(), string(k))
			opts.Priority = contract.SweepPriority
			scanCtx := workflow.WithActivityOptions(ctx, opts)
			var after *contract.DemandTarget
			for {
				want := min(max(remaining, 1), contract.MaxDemandCandidates)
				var scan contract.ScanDemandResult
				err := workflow.ExecuteActivity(scanCtx, contract.ScanDemandActivity, contract.ScanDemandParams{
					Kind: string(k), MaxCandidates: want,
					MergeMinGenerations: in.MergeMinGenerations, MaxPendingAge: in.MaxPendingAge,
					After: after, AsOf: asOf,
				}).Get(ctx, &scan)
				if err != nil {
					kp.scanErr = cutSweepError(ctx, fmt.Sprintf("%s: %s", k, errorText(err)), contract.FailureTextJSON)
					return
				}
				kp.pages++
				kp.omitted = max(0, scan.Qualified-len(scan.Targets))
				plan := planDemandWithin(scan.Targets, in, remaining)
				if kp.pages == 1 {
					kp.first = scan
					plan.below = max(0, scan.StoresWithDebt-scan.Qualified)
				}
				remaining -= len(plan.starts)
				last := remaining <= 0 || len(scan.Targets) < want || len(plan.starts) == 0 || kp.pages >= maxPages
				left := 0 // what this page's summary says is left for the next round
				if last {
					left = kp.omitted
				}
				kp.plans = append(kp.plans, plan)
				kp.batches = append(kp.batches, st.launch(ctx, pageKind(string(k), kp.pages), plan, left))
				if last {
					return
				}
				after = &scan.Targets[len(scan.Targets)-1]
			}
		})
	}
	listed.Wait(ctx)
	st.wg.Wait(ctx)

	pages := 0
	for _, k := range kinds {
		if k.scanErr != "" {
			res.ScanErrors = append(res.ScanErrors, k.scanErr)
		}
		pages += k.pages
		res.StoresWithDebt += k.first.StoresWithDebt
		res.DemandRecords += k.first.Records
		res.Qualified += k.first.Qualified
		res.SkippedOmitted += k.omitted // over threshold, beyond the pages listed: next sweep
		for _, p := range k.plans {
			res.Scanned += p.scanned
			for _, s := range p.skipped {
				addSkip(&res, s)
			}
		}
	}
	for _, k := range kinds {
		for _, b := range k.batches {
			b.report(ctx, &res)
		}
	}
	workflow.GetLogger(ctx).Info("Sweep finished.", "stores_with_debt", res.StoresWithDebt,
		"pages", pages, "started", res.StartedCount(), "skipped", len(res.Skipped)+res.SkippedOmitted, "scan_errors", len(res.ScanErrors))
	if len(res.ScanErrors) > 0 {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("demand index listing failed for %d of %d kinds: %s", len(res.ScanErrors), len(target.Kinds), res.ScanErrors[0]),
			contract.ErrTypeSweepListFailed, nil, res)
	}
	return res, nil
}

// pageKind names a kind's page in a window round's batch summaries: the kind for its first
// page, "generic page 3" for the others. Pure.
func pageKind(kind string, page int) string {
	if page <= 1 {
		return kind
	}
	return fmt.Sprintf("%s page %d", kind, page)
}
