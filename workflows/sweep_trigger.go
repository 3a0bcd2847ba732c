package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// mergeTrigger says whether the sweep merges t and why: the trigger (sweep-count before
// sweep-age, as mergeReason orders them) and the reason in words, with the store's debt, for
// the started run's WalTrigger and summary. Both are empty when t stays below the thresholds.
// Pure.
func mergeTrigger(t contract.DemandTarget, in contract.MaintenanceSweepInput) (trigger, reason string) {
	reason = mergeReason(t, in)
	switch {
	case reason == "":
		return "", ""
	case t.Pending >= in.MergeMinGenerations:
		trigger = contract.TriggerSweepCount
	default:
		trigger = contract.TriggerSweepAge
	}
	if trigger == contract.TriggerSweepCount && t.OldestPendingAge > 0 {
		reason += fmt.Sprintf(", oldest pending %s", t.OldestPendingAge.Round(time.Second))
	}
	if trigger == contract.TriggerSweepAge {
		reason += fmt.Sprintf(", %d pending", t.Pending)
	}
	return trigger, reason
}

// mergeUrgent: t's debt is far past the sweep's merge thresholds (contract.
// UrgentPastTriggerFactor times merge_min_generations, or times max_pending_age), so its
// merge goes ahead of routine ones (contract.PriorityUrgentMerge). Pure.
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
