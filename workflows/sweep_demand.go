package workflows

import (
	"sort"

	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// recordMaintenance reports a successful fleet-wide run to the worker's metrics; a failure to
// record is only logged, since the alert on the last success's age notices it.
func recordMaintenance(ctx workflow.Context, name string) {
	actx := workflow.WithActivityOptions(ctx, recordMaintenanceOptions())
	if err := workflow.ExecuteActivity(actx, contract.RecordMaintenanceActivity, contract.RecordMaintenanceParams{Workflow: name}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("Cannot record the maintenance run's success.", "workflow", name, "error", err)
	}
}

// planDemandWithin decides the starts for one kind's demand candidates, at most maxStarts,
// most indebted first; a compaction marker asks for CompactBase unless CompactMinRuns < 0.
// Pure.
func planDemandWithin(all []contract.DemandTarget, in contract.MaintenanceSweepInput, maxStarts int) sweepPlan {
	ts := append([]contract.DemandTarget(nil), all...)
	sort.SliceStable(ts, func(i, j int) bool { return contract.DemandBefore(ts[i], ts[j]) })
	p := sweepPlan{scanned: len(ts)}
	for _, t := range ts {
		p.add(t.Target, wantStarts(t, in), in, maxStarts)
	}
	return p
}
