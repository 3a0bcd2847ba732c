package contract

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// What a merge says about itself in Temporal visibility (issue 14, docs/TEMPORAL.md): why it
// ran (WalTrigger, set at start), and, once it has finished, how far behind the store was
// and what it folded. Search attributes are what a list view filters on; the memo repeats
// them for display, with the trigger's reason in words.
//
// SQL visibility (the dev server's SQLite, MySQL, PostgreSQL) offers each namespace only 3
// custom attributes of type Int (and 3 Double, 10 Keyword). The Int slots go to what
// filters matter most on: WalPending (live debt), WalPendingAtStart (how far behind) and
// WalReclaimed; WalBytesMerged is a Double (exact below 2^53 bytes), and the pass count,
// which only matters for display, lives in the memo (MemoPasses).
//
// The names are shared with contract/observe.go (the CLI side); they must stay identical.
const (
	WalTriggerName        = "WalTrigger"
	WalPendingAtStartName = "WalPendingAtStart"
	WalReclaimedName      = "WalReclaimed"
	WalBytesMergedName    = "WalBytesMerged"
)

// Typed keys of the observation search attributes. WalTrigger is set by the start helpers
// (and upserted as TriggerUnknown by a run started without one); WalPendingAtStart with the
// first listing of a merge; WalReclaimed and WalBytesMerged once, when the merge (its whole
// continue-as-new chain) has finished.
var (
	WalTrigger        = temporal.NewSearchAttributeKeyKeyword(WalTriggerName)
	WalPendingAtStart = temporal.NewSearchAttributeKeyInt64(WalPendingAtStartName)
	WalReclaimed      = temporal.NewSearchAttributeKeyInt64(WalReclaimedName)
	WalBytesMerged    = temporal.NewSearchAttributeKeyFloat64(WalBytesMergedName)
)

// Memo keys. MemoTrigger is set at start; the others when the merge has finished.
const (
	MemoTrigger        = "trigger"
	MemoTriggerReason  = "trigger_reason"
	MemoReclaimed      = "reclaimed"
	MemoBytesMerged    = "bytes_merged"
	MemoPasses         = "passes"
	MemoPendingAtStart = "pending_at_start"
)

// Trigger values: the WalTrigger of a run and the Trigger of its input.
const (
	// TriggerCount: a seal took the worker's own shard to merge_after_generations.
	TriggerCount = "count"
	// TriggerSweepCount: MaintenanceSweep found at least merge_min_generations pending.
	TriggerSweepCount = "sweep-count"
	// TriggerSweepAge: MaintenanceSweep found the oldest pending generation older than
	// max_pending_age.
	TriggerSweepAge = "sweep-age"
	// TriggerSweepRuns: MaintenanceSweep found at least compact_min_runs base runs
	// (CompactBase).
	TriggerSweepRuns = "sweep-runs"
	// TriggerHTTP: POST /api/v1/stores/{kind}/{name}/merge-wal.
	TriggerHTTP = "http"
	// TriggerCLI: `walkeeper merge` / `walkeeper compact`.
	TriggerCLI = "cli"
	// TriggerSchedule: a per-target Schedule's MergeWalTick.
	TriggerSchedule = "schedule"
	// TriggerBackpressure: an append was refused for too many pending generations.
	TriggerBackpressure = "backpressure"
	// TriggerUnknown: started without a trigger, e.g. by hand with `temporal workflow start`
	// or from Temporal Web.
	TriggerUnknown = "unknown"
)

// Triggers lists every trigger value, for docs and tests.
var Triggers = []string{TriggerCount, TriggerSweepCount, TriggerSweepAge, TriggerSweepRuns,
	TriggerHTTP, TriggerCLI, TriggerSchedule, TriggerBackpressure, TriggerUnknown}

// TriggerOrUnknown is trigger, or TriggerUnknown when it is empty.
func TriggerOrUnknown(trigger string) string {
	if trigger == "" {
		return TriggerUnknown
	}
	return trigger
}

// TriggerWords says who started a run and why, for summaries and logs:
// "sweep-age (oldest pending 11m0s >= 10m0s)".
func TriggerWords(trigger, reason string) string {
	trigger = TriggerOrUnknown(trigger)
	if reason == "" {
		return trigger
	}
	return fmt.Sprintf("%s (%s)", trigger, reason)
}
