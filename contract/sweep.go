package contract

import "time"

// MaintenanceSweepInput is the sweep's input (the Schedule walkeeper-sweep passes it).
// Zero fields take their defaults.
type MaintenanceSweepInput struct {
	// MergeMinGenerations: start MergeWal for a target with at least this many pending
	// generations in total (default 8).
	MergeMinGenerations int `json:"merge_min_generations,omitempty"`
	// MaxPendingAge: start MergeWal for a target whose oldest pending generation is older,
	// however few there are (default 10m; negative = off).
	MaxPendingAge time.Duration `json:"max_pending_age,omitempty"`
	// CompactMinRuns: start CompactBase for a target with at least this many base runs
	// (default 32; negative = off).
	CompactMinRuns int `json:"compact_min_runs,omitempty"`
	// MaxStarts caps the workflows one sweep starts (default 256); the most indebted targets
	// go first.
	MaxStarts int `json:"max_starts,omitempty"`
	// Concurrency bounds the StartWorkflows activities in flight (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// StartBatch is the number of starts per StartWorkflows activity (default 16).
	StartBatch int `json:"start_batch,omitempty"`
	// StartSpacing is the least time between the launches of two StartWorkflows batches of
	// one sweep (default 1s; negative = no pacing), so a sweep that finds a large debt
	// starts at most StartBatch workflows per StartSpacing instead of one burst on Temporal
	// and on storage (the merges it starts all list and prepare at once).
	StartSpacing time.Duration `json:"start_spacing,omitempty"`
	// ParallelPrepare: MergeWal starts for a target with more than one pending shard ask for
	// parallel prepares (commits stay one at a time). Default (nil) true.
	ParallelPrepare *bool `json:"parallel_prepare,omitempty"`
	// ScanConcurrency bounds the store stats one ScanStats activity reads at once
	// (0 = the activity's default, 8).
	ScanConcurrency int `json:"scan_concurrency,omitempty"`
	// Discovery picks how the sweep finds stores in debt: DiscoveryDemand ("" = default)
	// lists the demand index (cost follows the debt); DiscoveryScan reads every store's
	// stats (ScanStats, cost follows the fleet: the design before the index, kept for the
	// fleet benchmark and as an escape hatch).
	Discovery string `json:"discovery,omitempty"`
}

// MaintenanceSweepResult reports one sweep.
type MaintenanceSweepResult struct {
	// Scanned counts the stores whose stats were read.
	Scanned int `json:"scanned"`
	// Started lists the workflows started or attached to (the server does not tell which),
	// most indebted target first.
	Started []SweepStart `json:"started"`
	// Skipped lists targets not acted on and why, in debt order (at most maxSkippedListed;
	// SkippedOmitted counts the rest).
	Skipped        []SweepSkip `json:"skipped"`
	SkippedOmitted int         `json:"skipped_omitted,omitempty"`
	// ScanErrors lists kinds whose scan failed as a whole.
	ScanErrors []string `json:"scan_errors,omitempty"`
	// Discovery is how the stores were found (DiscoveryDemand or DiscoveryScan; "" in runs
	// recorded before the demand index).
	Discovery string `json:"discovery,omitempty"`
	// StoresWithDebt counts the stores with demand records, DemandRecords the records
	// listed, and Qualified the stores over a threshold (demand discovery only).
	StoresWithDebt int `json:"stores_with_debt,omitempty"`
	DemandRecords  int `json:"demand_records,omitempty"`
	Qualified      int `json:"qualified,omitempty"`
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
	Target string `json:"target"`
}

// MergeWalTickResult names the MergeWal the tick started or attached to.
type MergeWalTickResult struct {
	Target     string `json:"target"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}
