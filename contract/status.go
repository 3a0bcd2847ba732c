package contract

// Workflow phases, as MergeWalStatus and CompactBaseStatus report them.
const (
	PhaseStarting   = "starting"
	PhaseListing    = "listing"
	PhaseMerging    = "merging"
	PhaseCompacting = "compacting"
	PhaseContinuing = "continuing-as-new"
	PhaseDone       = "done"
)

// Blocked reasons shown by the status queries.
const (
	BlockedBudget   = "waiting for budget"
	BlockedBackoff  = "backing off after an error"
	BlockedSlot     = "waiting for a slot"
	BlockedNoWorker = "waiting for a slot, or no worker for shard"
)
