package contract

import "time"

// The demand-driven sweep and the paged reconcile (docs/DESIGN.md §12), bounded at any size.

// Names and bounds of the demand index (workflow and activity names: names.go).
const (
	MaintenanceSweepName        = "sweep"
	ReconcileDemandName         = "reconcile"
	MaxDemandCandidates         = 1000
	MaxReconcilePage            = 1000
	DefaultReconcilePage        = 500
	DefaultReconcilePagesPerRun = 50
	MaxReconcileUnreadable      = 50
)

// MaxPayloadBytes is the largest activity result or workflow input/result walkeeper sends:
// half the SDK's 512 KiB warning, far below gRPC's 4 MiB refusal.
const MaxPayloadBytes = 256 << 10

// ScanDemandParams asks for the most indebted stores of one kind, from the demand index.
type ScanDemandParams struct {
	Kind string `json:"kind"`
	// MaxCandidates bounds the targets returned (the sweep passes the starts it has left;
	// at most MaxDemandCandidates).
	MaxCandidates int `json:"max_candidates"`
	// MergeMinGenerations and MaxPendingAge are the sweep's merge thresholds: only stores at
	// or over one of them (or with a compaction marker) are candidates.
	MergeMinGenerations int           `json:"merge_min_generations"`
	MaxPendingAge       time.Duration `json:"max_pending_age,omitempty"`
	// After pages the candidates: only stores after it in DemandBefore order are returned
	// and counted in Qualified (nil = from the most indebted; docs/DESIGN.md §12).
	After *DemandTarget `json:"after,omitempty"`
	// AsOf, when set, is the moment pending ages are measured at instead of the activity's
	// clock, so every page of one sweep orders (and pages) stores alike.
	AsOf time.Time `json:"as_of,omitzero"`
}

// DemandTarget is one candidate of ScanDemand: a store's debt as its demand records show it.
type DemandTarget struct {
	Target           string        `json:"target"`
	Pending          int           `json:"pending"`
	MaxShardPending  int           `json:"max_shard_pending"`
	PendingShards    int           `json:"pending_shards,omitempty"`
	PendingBytes     int64         `json:"pending_bytes,omitempty"`
	OldestPendingAge time.Duration `json:"oldest_pending_age"`
	// Compact: the store's base has at least the store's compact_demand_runs runs.
	Compact bool `json:"compact,omitempty"`
}

// ScanDemandResult is one kind's candidates, at most MaxCandidates and as many as fit
// MaxPayloadBytes, most indebted first.
type ScanDemandResult struct {
	Kind    string         `json:"kind"`
	Targets []DemandTarget `json:"targets"`
	// StoresWithDebt counts the stores with at least one demand record.
	StoresWithDebt int `json:"stores_with_debt"`
	// Qualified counts the stores over a threshold (after ScanDemandParams.After when set);
	// Qualified - len(Targets) were left for the next page or sweep, or are Running.
	Qualified int `json:"qualified"`
	// Records counts the demand records listed.
	Records int `json:"records"`
	// Running counts the qualified stores left out of Targets because their MergeWal was
	// running (a start would only attach) and they carry no compaction marker.
	Running int `json:"running,omitempty"`
}

// ScanDemandProgress is ScanDemand's heartbeat: counters only (a retry lists again from
// the start; the listing costs requests in proportion to the debt, not the fleet).
type ScanDemandProgress struct {
	Records int `json:"records"`
	Stores  int `json:"stores"`
}

// DemandBefore orders candidates most indebted first (deepest shard, total pending, oldest
// pending, a compaction marker, then name), for the activity's heap and the workflow. Pure.
func DemandBefore(a, b DemandTarget) bool {
	switch {
	case a.MaxShardPending != b.MaxShardPending:
		return a.MaxShardPending > b.MaxShardPending
	case a.Pending != b.Pending:
		return a.Pending > b.Pending
	case a.OldestPendingAge != b.OldestPendingAge:
		return a.OldestPendingAge > b.OldestPendingAge
	case a.Compact != b.Compact:
		return a.Compact
	}
	return a.Target < b.Target
}

// ReconcileCursor is where a reconcile stands: a kind (index into target.Kinds), its last name.
type ReconcileCursor struct {
	KindIndex int    `json:"kind_index"`
	After     string `json:"after,omitempty"`
}

// ReconcilePageParams is one page of the registry to reconcile.
type ReconcilePageParams struct {
	Kind  string `json:"kind"`
	After string `json:"after,omitempty"`
	// Limit is the page size (default DefaultReconcilePage, at most MaxReconcilePage).
	Limit int `json:"limit,omitempty"`
	// Concurrency bounds the stores reconciled at once (default DefaultReconcileConcurrency,
	// 16; at most MaxStoreConcurrency).
	Concurrency int `json:"concurrency,omitempty"`
}

// StoreProblem is one store reconcile could not read.
type StoreProblem struct {
	Target string `json:"target"`
	// Error is cut by FailureTextJSON, so MaxReconcileUnreadable problems fit one payload.
	Error     string `json:"error"`
	ErrorType string `json:"error_type,omitempty"`
}

// ReconcileCounts are a reconcile's repairs.
type ReconcileCounts struct {
	Stores     int `json:"stores"`
	Missing    int `json:"missing"`
	Covered    int `json:"covered"`
	Orphans    int `json:"orphans"`
	Unreadable int `json:"unreadable"`
	Pages      int `json:"pages"`
}

// Add adds o to c.
func (c *ReconcileCounts) Add(o ReconcileCounts) {
	c.Stores += o.Stores
	c.Missing += o.Missing
	c.Covered += o.Covered
	c.Orphans += o.Orphans
	c.Unreadable += o.Unreadable
	c.Pages += o.Pages
}

// ReconcilePageResult reports one page. Next is "" after the kind's last page.
type ReconcilePageResult struct {
	Kind   string          `json:"kind"`
	Next   string          `json:"next,omitempty"`
	Counts ReconcileCounts `json:"counts"`
	// Problems lists unreadable stores (at most MaxReconcileUnreadable; Counts.Unreadable
	// counts all).
	Problems []StoreProblem `json:"problems,omitempty"`
}

// ReconcileDemandInput is the reconcile's input (zero from the schedule; a continued run
// carries the cursor and totals, CarriedField). Validate bounds every field.
type ReconcileDemandInput struct {
	PageSize    int `json:"page_size,omitempty"`
	Concurrency int `json:"concurrency,omitempty"`
	// PagesPerRun: continue-as-new after this many pages (default
	// DefaultReconcilePagesPerRun), so the history stays bounded at any fleet size.
	PagesPerRun int             `json:"pages_per_run,omitempty"`
	Cursor      ReconcileCursor `json:"cursor"`
	Totals      ReconcileCounts `json:"totals"`
	Problems    []StoreProblem  `json:"problems,omitempty"`
	// Runs counts the workflow runs of this reconcile before this one.
	Runs      int       `json:"runs,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	decodeErr error
}

// ReconcileDemandResult is the reconcile's totals over all its runs.
type ReconcileDemandResult struct {
	Totals   ReconcileCounts `json:"totals"`
	Problems []StoreProblem  `json:"problems,omitempty"`
	Runs     int             `json:"runs"`
}

// RecordMaintenanceParams reports one successful fleet-wide run (sweep or reconcile), so the
// worker's gauge of the last success moves and the alert on its age stays quiet.
type RecordMaintenanceParams struct {
	Workflow string `json:"workflow"`
}
