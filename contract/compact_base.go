package contract

import "time"

// CompactBaseInput is CompactBase's input; only Target is required, Validate bounds the rest.
type CompactBaseInput struct {
	Target string `json:"target"`
	// MaxRuns and MaxBytes bound one pass (0 = the store's defaults: 16 runs, and bytes
	// capped by the merge budget; MaxRuns -1 = every run).
	MaxRuns  int   `json:"max_runs,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// MaxPasses bounds the passes of one workflow (default 16).
	MaxPasses int `json:"max_passes,omitempty"`
	// TargetRuns: stop once the base has at most this many runs (default 4).
	TargetRuns int `json:"target_runs,omitempty"`
	// Trigger and TriggerReason: see MergeWalInput.
	Trigger       string `json:"trigger,omitempty"`
	TriggerReason string `json:"trigger_reason,omitempty"`
	decodeErr     error
}

// CompactBaseResult is CompactBase's result.
type CompactBaseResult struct {
	Target         string `json:"target"`
	Passes         int    `json:"passes"`
	Committed      int    `json:"committed"`
	RunsLeft       int    `json:"runs_left"`
	BaseVersion    uint64 `json:"base_version,omitempty"`
	RowsIn         int64  `json:"rows_in"`
	RowsOut        int64  `json:"rows_out"`
	DroppedDeletes int64  `json:"dropped_deletes"`
}

// CompactBaseStatus answers the status query on CompactBase.
type CompactBaseStatus struct {
	Target   string `json:"target"`
	Phase    string `json:"phase"`
	Pass     int    `json:"pass"`
	RunsLeft int    `json:"runs_left"`
	Blocked  string `json:"blocked,omitempty"`
	// InFlight, SlotWait and RefusedSignals: see MergeWalStatus.
	InFlight       []InFlightActivity `json:"in_flight,omitempty"`
	SlotWait       time.Duration      `json:"slot_wait,omitempty"`
	RefusedSignals int                `json:"refused_signals,omitempty"`
	// IgnoredFields is MergeWalStatus.IgnoredFields of this run's input.
	IgnoredFields []string `json:"ignored_fields,omitempty"`
}
