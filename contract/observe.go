package contract

import (
	"fmt"

	"github.com/walkeeper/walkeeper/target"
)

// Observation names: what a merge or compaction records about why it ran and what it did,
// for list views (Temporal Web, `walkeeper history`, `walkeeper queries`) to show and filter.
//
// The workflow side sets them (search attributes on start and on finish, memo on start and
// on finish); readers such as `walkeeper history` only read them and show "-" for a run that
// does not carry one (runs started before these existed, or a start that left them out).
// Search attributes are where filtering matters; the memo is for display only.
const (
	// WalTriggerName (Keyword) says what started the run: one of the Trigger* values.
	WalTriggerName = "WalTrigger"
	// WalPendingAtStartName (Int) is the store's pending generations when the run started;
	// unlike WalPending it is not lowered as the merge reclaims, so a finished run still
	// shows how far behind the store was.
	WalPendingAtStartName = "WalPendingAtStart"
	// WalReclaimedName (Int) is the generations the run reclaimed, set when it finishes.
	WalReclaimedName = "WalReclaimed"
	// WalBytesMergedName (Double: SQL visibility has only 3 custom Int slots per namespace,
	// see contract/observe_attrs.go) is the WAL bytes the run folded into the base table.
	WalBytesMergedName = "WalBytesMerged"
	// WalPassesName is the merge passes the run made over all shards. Not registered as a
	// search attribute (no Int slot left on SQL visibility): the passes are in the memo only.
	WalPassesName = "WalPasses"
)

// Memo keys of MergeWal and CompactBase runs: the display copies of the values above.
const (
	MemoTrigger        = "trigger"
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
	TriggerCount        = "count"
	TriggerSweepAge     = "sweep-age"
	TriggerSweepCount   = "sweep-count"
	TriggerHTTP         = "http"
	TriggerCLI          = "cli"
	TriggerSchedule     = "schedule"
	TriggerBackPressure = "back-pressure"
)

// MissingStoreMessage is the one line that refuses work on a store that does not exist, said
// the same way by the CLI's pre-check and by a MergeWal or CompactBase started by hand for a
// missing store (which fails once, non-retryably, with it). worker is the base URL of a
// worker's HTTP API, or "" for a placeholder.
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
