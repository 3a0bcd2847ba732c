package contract

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

// SweepPriority is the task-queue priority of the sweep's tasks (1 = first; the default is
// 3), so the MergeWal runs it starts on the same queue cannot starve it; it needs a matcher
// that honours priority (docs/OPERATIONS.md).
var SweepPriority = temporal.Priority{PriorityKey: PrioritySweep}

// MaintenanceSweepInput is the sweep's input; zero fields take their defaults.
type MaintenanceSweepInput struct {
	// MergeMinGenerations: start MergeWal for a target with at least this many pending
	// generations in total (default 8).
	MergeMinGenerations int `json:"merge_min_generations,omitempty"`
	// MaxPendingAge: start MergeWal for a target whose oldest pending generation is older,
	// however few there are (default 10m; negative = off).
	MaxPendingAge time.Duration `json:"max_pending_age,omitempty"`
	// CompactMinRuns: negative turns the sweep's CompactBase starts off; otherwise a store
	// is compacted when its compaction marker says its base has at least the workers'
	// --compact-demand-runs runs, since the demand index keeps no run count (default 32).
	CompactMinRuns int `json:"compact_min_runs,omitempty"`
	// MaxStarts caps the workflows one sweep starts, most indebted first (default
	// DefaultSweepMaxStarts, at most MaxSweepStarts), paging each kind's candidates until
	// MaxStarts are planned.
	MaxStarts int `json:"max_starts,omitempty"`
	// Concurrency bounds the StartWorkflows activities in flight (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// StartBatch is the number of starts per StartWorkflows activity (default
	// DefaultSweepStartBatch, 256; at most MaxStartBatch).
	StartBatch int `json:"start_batch,omitempty"`
	// StartSpacing is the least time between two StartWorkflows batches of one sweep
	// (default 1s; negative = no pacing), so a large debt is not started in one burst.
	StartSpacing time.Duration `json:"start_spacing,omitempty"`
	// ParallelPrepare: MergeWal starts for a target with more than one pending shard ask for
	// parallel prepares (commits stay one at a time). Default (nil) true.
	ParallelPrepare *bool `json:"parallel_prepare,omitempty"`
	decodeErr       error
}

// MaintenanceSweepResult reports one sweep.
type MaintenanceSweepResult struct {
	// Scanned counts the candidates the demand index's pages returned (no store is read).
	Scanned int `json:"scanned"`
	// Started lists the workflows started or attached to, most indebted first, at most
	// MaxSweepListed; StartedOmitted counts the rest (StartedCount).
	Started        []SweepStart `json:"started"`
	StartedOmitted int          `json:"started_omitted,omitempty"`
	// Skipped lists targets not acted on and why, in debt order, at most MaxSweepListed;
	// SkippedOmitted counts the rest and the qualified stores not paged to.
	Skipped        []SweepSkip `json:"skipped"`
	SkippedOmitted int         `json:"skipped_omitted,omitempty"`
	// ScanErrors lists kinds whose scan failed as a whole.
	ScanErrors []string `json:"scan_errors,omitempty"`
	// StoresWithDebt counts the stores with demand records, DemandRecords the records
	// listed, and Qualified the stores over a threshold.
	StoresWithDebt int `json:"stores_with_debt,omitempty"`
	DemandRecords  int `json:"demand_records,omitempty"`
	Qualified      int `json:"qualified,omitempty"`
}

// StartedCount is how many workflows the sweep started or attached to, listed or omitted.
func (r MaintenanceSweepResult) StartedCount() int { return len(r.Started) + r.StartedOmitted }

// Defaults and bounds of one sweep (docs/DESIGN.md §12, "Sweep"). The paged demand sweep
// refuses an input past a bound as invalid, so no sweep's history or payload outgrows them.
const (
	// DefaultSweepMaxStarts clears 1 % of a million stores in one sweep interval.
	DefaultSweepMaxStarts = 10_000
	// DefaultSweepStartBatch: 256 starts are one StartWorkflows activity, at most 88 KiB of
	// input and 96 KiB of result with 128-byte store names (TestStartBatchPayloadBounded).
	DefaultSweepStartBatch = 256
	MaxSweepStarts         = 50_000
	// MaxStartBatch bounds StartBatch: 512 starts with 128-byte names are at most 175 KiB
	// in and 191 KiB out, under MaxPayloadBytes.
	MaxStartBatch = 512
	// MaxSweepListed bounds the starts and the skips a sweep's result lists by name: 256 of
	// each with 128-byte names stay under MaxPayloadBytes (TestSweepResultPayloadBounded).
	MaxSweepListed = 256
	// MaxSweepEvents bounds the history one sweep (or one window round) may add, by
	// SweepHistoryBound: half of Temporal's 10,240-event warning, so a window continuing
	// as new at DefaultSweepEventBudget stays below it too.
	MaxSweepEvents = 5_000
)

// SweepHistoryBound is the most events one paged demand sweep of kinds kinds adds to a
// history: per kind SweepPagesPerKind pages of a ScanDemand and its workflow task (6 events
// each), maxStarts/startBatch + pages batches of a StartWorkflows, its timer and two
// workflow tasks (11 each), and 24 for the rest. Pure.
func SweepHistoryBound(kinds, maxStarts, startBatch int) int {
	pages := kinds * SweepPagesPerKind(maxStarts)
	batches := (maxStarts+startBatch-1)/startBatch + pages
	return 24 + 6*pages + 11*batches
}

// SweepPagesPerKind bounds the ScanDemand pages one sweep lists per kind: two per
// MaxDemandCandidates of maxStarts, since a page that starts fewer still ends the listing
// within twice as many, plus the short last page. Pure.
func SweepPagesPerKind(maxStarts int) int {
	return 2*((maxStarts+MaxDemandCandidates-1)/MaxDemandCandidates) + 1
}

// SweepStart is one workflow the sweep started or attached to.
type SweepStart struct {
	Target   string `json:"target"`
	Workflow string `json:"workflow"`
	// Trigger is the start's WalTrigger (sweep-count, sweep-age, sweep-runs; "" in runs
	// recorded before it was reported).
	Trigger    string `json:"trigger,omitempty"`
	Reason     string `json:"reason"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}

// SweepSkip is one target the sweep did not act on.
type SweepSkip struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
}

// MergeWalTickInput is the input of MergeWalTick, the action of per-target schedules.
type MergeWalTickInput struct {
	Target    string `json:"target"`
	decodeErr error
}

// MergeWalTickResult names the MergeWal the tick started or attached to.
type MergeWalTickResult struct {
	Target     string `json:"target"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}
