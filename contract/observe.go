package contract

import (
	"cmp"
	"fmt"

	"github.com/walkeeper/walkeeper/target"
)

// Memo keys of MergeWal and CompactBase runs: the display copies of their search attributes
// (search_attributes.go).
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
