package workflows

import (
	"sort"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// demandScanOptions: one heartbeating, bounded-retry listing per kind. After the last
// attempt the sweep fails with ErrTypeSweepListFailed, never retrying silently for ever.
func demandScanOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           contract.TaskQueue,
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(5, 30*time.Second),
		Summary:             "scan demand index",
	}
}

func recordMaintenanceOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           contract.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         retryPolicy(3, 10*time.Second),
		Summary:             "record success",
	}
}

// recordMaintenance reports a successful fleet-wide run to the worker's metrics. A failure
// to record is logged, not returned: the run itself succeeded, and the alert on the age of
// the last success is what notices a worker that cannot record.
func recordMaintenance(ctx workflow.Context, name string) {
	actx := workflow.WithActivityOptions(ctx, recordMaintenanceOptions())
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
		compact := ""
		if t.Compact && in.CompactMinRuns > 0 {
			compact = "compaction marker: base runs >= compact_demand_runs"
		}
		p.add(t.Target, wantStarts(t, compact, in), in, maxStarts)
	}
	return p
}
