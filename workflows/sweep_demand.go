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

// sweepDemandChange versions the sweep's discovery: stores in debt are found by listing the
// demand index (one ScanDemand per kind, cost in proportion to the debt) instead of reading
// every store's stats (ScanStats, whose one result per kind outgrew Temporal's payload
// limits at ~16,000 stores). Runs recorded before it replay the scan. A run with
// Discovery "scan" still scans (the fleet benchmark's "design today" side).
const (
	sweepDemandChange  = "sweep-demand-index"
	sweepDemandVersion = workflow.Version(1)
)

// demandScanOptions: one heartbeating, bounded-retry listing per kind. After the last
// attempt the sweep fails with ErrTypeSweepListFailed, never retrying silently for ever.
func demandScanOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(5, 30*time.Second),
		Summary:             "scan demand index",
	}
}

func recordMaintenanceOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryPolicy(3, 10*time.Second),
		Summary:             "record success",
	}
}

// demandSweep is MaintenanceSweep over the demand index: the paged sweep
// (pagedDemandSweep), or for runs recorded before sweepDemandPagesChange one ScanDemand per
// kind (singleDemandSweep). label names the window round, if any; the caller records the
// sweep's success.
func demandSweep(ctx workflow.Context, in contract.MaintenanceSweepInput, label roundLabel) (contract.MaintenanceSweepResult, error) {
	if workflow.GetVersion(ctx, sweepDemandPagesChange, workflow.DefaultVersion, sweepDemandPagesVersion) >= sweepDemandPagesVersion {
		return pagedDemandSweep(ctx, in, label)
	}
	return singleDemandSweep(ctx, legacyStartDefaults(in), label)
}

// singleDemandSweep is the demand sweep before sweepDemandPagesChange: each kind's
// ScanDemand returns at most in.MaxStarts candidates (at most MaxDemandCandidates), most
// indebted first, and the kind is planned and started as soon as its scan returns (the
// per-kind order of sweepPerKindChange). Its history holds a constant number of events per
// kind plus one per start batch: bounded by MaxStarts, not by the fleet. A kind whose scan
// fails after its retries fails the sweep, after the other kinds' starts, with
// ErrTypeSweepListFailed.
func singleDemandSweep(ctx workflow.Context, in contract.MaintenanceSweepInput, label roundLabel) (contract.MaintenanceSweepResult, error) {
	res := contract.MaintenanceSweepResult{Started: []contract.SweepStart{}, Skipped: []contract.SweepSkip{}, Discovery: contract.DiscoveryDemand}
	futures := make([]workflow.Future, len(target.Kinds))
	for i, k := range target.Kinds {
		scanCtx := workflow.WithActivityOptions(ctx, withQueue(label.options(demandScanOptions(), string(k)), contract.TaskQueue))
		futures[i] = workflow.ExecuteActivity(scanCtx, contract.ScanDemandActivity, contract.ScanDemandParams{
			Kind: string(k), MaxCandidates: min(in.MaxStarts, contract.MaxDemandCandidates),
			MergeMinGenerations: in.MergeMinGenerations, MaxPendingAge: in.MaxPendingAge,
		})
	}
	st := &sweepStarts{in: in, label: label, sem: workflow.NewSemaphore(ctx, int64(in.Concurrency)), wg: workflow.NewWaitGroup(ctx)}
	if in.StartSpacing > 0 {
		st.pace = workflow.NewSemaphore(ctx, 1) // batches spaced out as in the scan path
	}
	kinds := make([]kindSweep, len(target.Kinds))
	remaining := in.MaxStarts
	sel := workflow.NewSelector(ctx)
	for i, f := range futures {
		sel.AddFuture(f, func(f workflow.Future) {
			var scan contract.ScanDemandResult
			if err := f.Get(ctx, &scan); err != nil {
				kinds[i].scanErr = fmt.Sprintf("%s: %s", target.Kinds[i], errorText(err))
				return
			}
			res.StoresWithDebt += scan.StoresWithDebt
			res.DemandRecords += scan.Records
			res.Qualified += scan.Qualified
			left := max(0, scan.Qualified-len(scan.Targets))
			res.SkippedOmitted += left // over threshold, beyond the scan's candidates: next sweep
			kinds[i].plan = planDemandWithin(scan.Targets, in, remaining)
			kinds[i].plan.below = max(0, scan.StoresWithDebt-scan.Qualified)
			remaining -= len(kinds[i].plan.starts)
			kinds[i].batches = st.launch(ctx, string(target.Kinds[i]), kinds[i].plan, left)
		})
	}
	for range futures {
		sel.Select(ctx)
	}
	st.wg.Wait(ctx)

	addSkip := listSkip(&res)
	for _, k := range kinds {
		if k.scanErr != "" {
			res.ScanErrors = append(res.ScanErrors, k.scanErr)
		}
		res.Scanned += k.plan.scanned
		for _, s := range k.plan.skipped {
			addSkip(s)
		}
	}
	for _, k := range kinds {
		k.batches.report(&res, addSkip)
	}
	workflow.GetLogger(ctx).Info("Sweep finished.", "discovery", res.Discovery, "stores_with_debt", res.StoresWithDebt,
		"started", res.StartedCount(), "skipped", len(res.Skipped)+res.SkippedOmitted, "scan_errors", len(res.ScanErrors))
	if len(res.ScanErrors) > 0 {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("demand index listing failed for %d of %d kinds: %s", len(res.ScanErrors), len(target.Kinds), res.ScanErrors[0]),
			contract.ErrTypeSweepListFailed, nil, res)
	}
	return res, nil
}

// recordMaintenance reports a successful fleet-wide run to the worker's metrics. A failure
// to record is logged, not returned: the run itself succeeded, and the alert on the age of
// the last success is what notices a worker that cannot record.
func recordMaintenance(ctx workflow.Context, name string) {
	actx := workflow.WithActivityOptions(ctx, withQueue(recordMaintenanceOptions(), contract.TaskQueue))
	if err := workflow.ExecuteActivity(actx, contract.RecordMaintenanceActivity, contract.RecordMaintenanceParams{Workflow: name}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("Cannot record the maintenance run's success.", "workflow", name, "error", err)
	}
}

// planDemandWithin decides the starts for one kind's demand candidates, at most maxStarts
// (what earlier kinds of the sweep left of in.MaxStarts), most indebted first. A compaction
// marker asks for CompactBase (the store's compact_demand_runs decided it; the sweep's
// CompactMinRuns < 0 turns compaction starts off). Pure.
func planDemandWithin(all []contract.DemandTarget, in contract.MaintenanceSweepInput, maxStarts int) sweepPlan {
	ts := append([]contract.DemandTarget(nil), all...)
	sort.SliceStable(ts, func(i, j int) bool { return contract.DemandBefore(ts[i], ts[j]) })
	p := sweepPlan{scanned: len(ts)}
	for _, t := range ts {
		stats := contract.TargetStats{Target: t.Target, Pending: t.Pending, MaxShardPending: t.MaxShardPending,
			OldestPendingAge: t.OldestPendingAge, PendingShards: t.PendingShards}
		compact := ""
		if t.Compact && in.CompactMinRuns > 0 {
			compact = "compaction marker: base runs >= compact_demand_runs"
		}
		p.add(t.Target, wantStarts(stats, compact, in), in, maxStarts)
	}
	return p
}
