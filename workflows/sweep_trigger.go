package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// mergeTrigger says whether the sweep merges t and why: the trigger (sweep-count before
// sweep-age) and the reason in words, both empty below the thresholds. Pure.
func mergeTrigger(t contract.DemandTarget, in contract.MaintenanceSweepInput) (trigger, reason string) {
	oldest := t.OldestPendingAge.Round(time.Second)
	switch {
	case t.Pending <= 0:
		return "", ""
	case t.Pending >= in.MergeMinGenerations:
		reason = fmt.Sprintf("%d pending >= %d", t.Pending, in.MergeMinGenerations)
		if t.OldestPendingAge > 0 {
			reason += fmt.Sprintf(", oldest pending %s", oldest)
		}
		return contract.TriggerSweepCount, reason
	case in.MaxPendingAge > 0 && t.OldestPendingAge >= in.MaxPendingAge:
		return contract.TriggerSweepAge, fmt.Sprintf("oldest pending %s >= %s, %d pending", oldest, in.MaxPendingAge, t.Pending)
	}
	return "", ""
}

// mergeUrgent: t's debt is contract.UrgentPastTriggerFactor past the sweep's merge thresholds,
// so its merge goes ahead of routine ones. Pure.
func mergeUrgent(t contract.DemandTarget, in contract.MaintenanceSweepInput) bool {
	f := contract.UrgentPastTriggerFactor
	return t.Pending >= f*in.MergeMinGenerations ||
		(in.MaxPendingAge > 0 && t.OldestPendingAge >= time.Duration(f)*in.MaxPendingAge)
}

// scheduledByID is the system search attribute naming the Schedule that started a run.
var scheduledByID = temporal.NewSearchAttributeKeyKeyword("TemporalScheduledById")

// scheduleReason names the Schedule that started this tick, for the merge's summary.
func scheduleReason(ctx workflow.Context) string {
	if id, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(scheduledByID); ok && id != "" {
		return "schedule " + id
	}
	return "per-target schedule"
}
