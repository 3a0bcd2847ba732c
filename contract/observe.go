package contract

import (
	"cmp"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/target"
)

// What a merge or compaction says about itself in Temporal visibility, so an operator can
// find and judge any run from a list view (docs/TEMPORAL.md): why it ran and, once finished,
// how far behind the store was and what it folded; the memo repeats it for display. SQL
// visibility offers only 3 custom Int attributes per namespace, so the Ints go to WalPending,
// WalPendingAtStart and WalReclaimed, WalBytesMerged is a Double and the passes live in the
// memo.
const (
	// WalTriggerName (Keyword) says what started the run: one of Triggers.
	WalTriggerName = "WalTrigger"
	// WalPendingAtStartName (Int) is the store's pending generations when the run started;
	// unlike WalPending it is not lowered as the merge reclaims, so a finished run still
	// shows how far behind the store was.
	WalPendingAtStartName = "WalPendingAtStart"
	// WalReclaimedName (Int) is the generations the run reclaimed, set when it finishes.
	WalReclaimedName = "WalReclaimed"
	// WalBytesMergedName (Double) is the WAL bytes the run folded into the base table.
	WalBytesMergedName = "WalBytesMerged"
	// WalPassesName is the merge passes the run made over all shards. Not registered as a
	// search attribute (no Int slot left on SQL visibility): the passes are in the memo only.
	WalPassesName = "WalPasses"
)

// Typed keys of the observation search attributes: WalTrigger set at start,
// WalPendingAtStart with a merge's first listing, the others once its chain has finished.
var (
	WalTrigger        = temporal.NewSearchAttributeKeyKeyword(WalTriggerName)
	WalPendingAtStart = temporal.NewSearchAttributeKeyInt64(WalPendingAtStartName)
	WalReclaimed      = temporal.NewSearchAttributeKeyInt64(WalReclaimedName)
	WalBytesMerged    = temporal.NewSearchAttributeKeyFloat64(WalBytesMergedName)
)

// Memo keys of MergeWal and CompactBase runs: the display copies of the values above.
const (
	MemoTrigger = "trigger"
	// MemoTriggerReason is the trigger's reason in words, set with MemoTrigger.
	MemoTriggerReason  = "trigger_reason"
	MemoReclaimed      = "reclaimed"
	MemoBytesMerged    = "bytes_merged"
	MemoPasses         = "passes"
	MemoPendingAtStart = "pending_at_start"
	// MemoActions is MergeWal's own count of the billable Temporal actions its chain
	// recorded (MergeWalResult.Actions), set with the outcome.
	MemoActions = "actions"
)

// Trigger values of WalTrigger and the "trigger" memo: one per way a merge gets started.
const (
	TriggerCount      = "count"
	TriggerSweepAge   = "sweep-age"
	TriggerSweepCount = "sweep-count"
	// TriggerSweepRuns: MaintenanceSweep found at least compact_min_runs base runs
	// (CompactBase).
	TriggerSweepRuns    = "sweep-runs"
	TriggerHTTP         = "http"
	TriggerCLI          = "cli"
	TriggerSchedule     = "schedule"
	TriggerBackPressure = "back-pressure"
	// TriggerUnknown: started without a trigger, e.g. by hand with `temporal workflow start`
	// or from Temporal Web.
	TriggerUnknown = "unknown"
)

// Triggers lists every trigger value: what an input's trigger may name (triggerField).
var Triggers = []string{TriggerCount, TriggerSweepCount, TriggerSweepAge, TriggerSweepRuns,
	TriggerHTTP, TriggerCLI, TriggerSchedule, TriggerBackPressure, TriggerUnknown}

// TriggerOrUnknown is trigger, or TriggerUnknown when it is empty.
func TriggerOrUnknown(trigger string) string {
	return cmp.Or(trigger, TriggerUnknown)
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

// MissingStoreMessage is the one line that refuses work on a store that does not exist, the
// same from the CLI's pre-check and from a run started by hand; worker is the base URL of a
// worker's HTTP API ("" for a placeholder).
func MissingStoreMessage(t target.Target, worker string) string {
	if worker == "" {
		worker = "http://<worker>"
	}
	body := ""
	if t.Kind == target.KindGeneric {
		// A generic store needs a schema with a string key "id"; the other kinds' are fixed.
		body = ` -H 'Content-Type: application/json' -d '{"fields":[{"name":"id","type":"string"}, ...]}'`
	}
	return fmt.Sprintf("store %s does not exist; create it with: curl -XPOST %s/api/v1/stores/%s%s",
		t, worker, t.Path(), body)
}
