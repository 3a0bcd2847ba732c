package contract

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// What a merge says about itself in Temporal visibility, so an operator can find and judge any run from a list view
// (docs/TEMPORAL.md): why it
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
// The names (WalTriggerName, ..., the Memo* keys and most Trigger* values) are declared in
// contract/observe.go; this file adds the typed keys the workflows use, the values
// observe.go does not name, and the words.

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

// MemoTriggerReason is the memo key of the trigger's reason in words, set with MemoTrigger.
const MemoTriggerReason = "trigger_reason"

// Trigger values besides those of contract/observe.go.
const (
	// TriggerSweepRuns: MaintenanceSweep found at least compact_min_runs base runs
	// (CompactBase).
	TriggerSweepRuns = "sweep-runs"
	// TriggerUnknown: started without a trigger, e.g. by hand with `temporal workflow start`
	// or from Temporal Web.
	TriggerUnknown = "unknown"
)

// Triggers lists every trigger value, for docs and tests.
var Triggers = []string{TriggerCount, TriggerSweepCount, TriggerSweepAge, TriggerSweepRuns,
	TriggerHTTP, TriggerCLI, TriggerSchedule, TriggerBackPressure, TriggerUnknown}

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
