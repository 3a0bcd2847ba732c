// Package workflows holds walkeeper's deterministic orchestration: MergeWal, CompactBase,
// MaintenanceSweep and MergeWalTick, the names and IDs every trigger shares, and the
// contract (activity names, params and results) that package activities implements.
//
// Nothing here does I/O from workflow code. The client-side helpers StartMergeWal and
// StartCompactBase are the only way walkeeper starts these workflows, so every trigger
// (HTTP, CLI, count trigger, sweep, schedule tick) dedupes on the same workflow ID.
package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/store"
)

// Task queues (docs/DESIGN.md §4).
const (
	// TaskQueue is the shared queue: workflows, scans, stats, clean-up, and Prepare/Commit of
	// shards whose owner does not pick up its own queue in time.
	TaskQueue = "walkeeper"
	// ShardQueuePrefix prefixes each writer's own queue; see ShardQueue.
	ShardQueuePrefix = "walkeeper-shard-"
)

// ShardQueue is the task queue served by the owner of shard.
func ShardQueue(shard string) string { return ShardQueuePrefix + shard }

// Workflow type names. Workflows are registered under these names, never under Go
// identifiers, so renaming a function cannot break a running history.
const (
	MergeWalWorkflow         = "MergeWal"
	CompactBaseWorkflow      = "CompactBase"
	MaintenanceSweepWorkflow = "MaintenanceSweep"
	// MergeWalTickWorkflow is the action of per-target schedules: it only starts (or attaches
	// to) MergeWal under its real ID, because schedule-started IDs carry a timestamp suffix.
	MergeWalTickWorkflow = "MergeWalTick"
)

// Activity type names, implemented by package activities.
const (
	ListPendingShardsActivity = "ListPendingShards"
	PrepareActivity           = "Prepare"
	CommitActivity            = "Commit"
	AbortActivity             = "Abort"
	CompactBaseActivity       = "CompactBase"
	ScanStatsActivity         = "ScanStats"
	StartWorkflowsActivity    = "StartWorkflows"
)

// StatusQuery answers with MergeWalStatus on MergeWal and CompactBaseStatus on CompactBase.
const StatusQuery = "status"

// ActivityStateSignal carries ActivityState from a running activity to its workflow. It is
// how the status query learns what the workflow cannot observe on its own: that an
// activity is running (not waiting for a slot), waiting for the memory budget, or backing
// off before a retry.
const ActivityStateSignal = "walkeeper-activity-state"

// Application error types. Activities map store error marks onto them in one place
// (activities/errors.go); workflows branch on them and list the non-retryable ones in every
// retry policy.
const (
	ErrTypeInvalidInput     = "InvalidInput"
	ErrTypeCorruptData      = "CorruptData"
	ErrTypeNotFound         = "NotFound"
	ErrTypeStalePreparation = "StalePreparation"
	ErrTypeConflict         = "Conflict"
	ErrTypeBudgetBusy       = "BudgetBusy"
	ErrTypeFenced           = "Fenced"
	ErrTypeTooManyPending   = "TooManyPending"
	ErrTypeAlreadyExists    = "AlreadyExists"
	ErrTypeClosed           = "Closed"
	ErrTypeInternal         = "Internal"
	ErrTypeMisconfigured    = "Misconfigured"
	ErrTypeStartFailed      = "StartFailed"
	ErrTypeAllShardsFailed  = "AllShardsFailed"
	ErrTypeScanFailed       = "ScanFailed"
)

// NonRetryableErrorTypes are never retried by an activity retry policy: retrying the same
// input cannot help. StalePreparation is handled by the workflow (abort, then prepare again).
var NonRetryableErrorTypes = []string{
	ErrTypeInvalidInput,
	ErrTypeCorruptData,
	ErrTypeNotFound,
	ErrTypeStalePreparation,
	ErrTypeMisconfigured,
}

// MergeWalID is the workflow ID of target's merge: "merge-wal/<kind>/<name>".
func MergeWalID(t store.Target) string { return "merge-wal/" + t.Path() }

// CompactID is the workflow ID of target's base compaction: "compact/<kind>/<name>".
func CompactID(t store.Target) string { return "compact/" + t.Path() }

// Search attribute names (docs/DESIGN.md §4).
const (
	WalTargetName  = "WalTarget"
	WalKindName    = "WalKind"
	WalPendingName = "WalPending"
)

// Typed search attribute keys. MergeWal and CompactBase carry WalTarget and WalKind from the
// start (and upsert them when a bare CLI start left them out); MergeWal keeps WalPending
// current as it merges.
var (
	WalTarget  = temporal.NewSearchAttributeKeyKeyword(WalTargetName)
	WalKind    = temporal.NewSearchAttributeKeyKeyword(WalKindName)
	WalPending = temporal.NewSearchAttributeKeyInt64(WalPendingName)
)

// SearchAttributes lists the custom search attributes walkeeper uses, for registration with
// the operator API on worker start.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	WalTargetName:  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	WalKindName:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	WalPendingName: enumspb.INDEXED_VALUE_TYPE_INT,
}

// shortShard abbreviates a shard id for human-facing text (details, summaries).
func shortShard(shard string) string {
	if i := strings.IndexByte(shard, '-'); i > 0 && i <= 8 {
		return shard[:i]
	}
	if len(shard) > 8 {
		return shard[:8]
	}
	return shard
}
