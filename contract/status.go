package contract

import (
	"fmt"
	"strings"
)

// Workflow phases, as MergeWalStatus and CompactBaseStatus report them.
const (
	PhaseStarting = "starting"
	PhaseListing  = "listing"
	PhaseMerging  = "merging"
	// PhaseWaiting: a MergeWal whose writers seal as fast as it merges waits for the next
	// listing, so that its passes are not of a few generations each.
	PhaseWaiting    = "waiting"
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

// BackoffReason is the blocked reason of an activity whose attempt failed with lastErr
// ("" = unknown) and waits for its next attempt.
func BackoffReason(attempt int, lastErr string) string {
	if lastErr == "" {
		return BlockedBackoff
	}
	return fmt.Sprintf("%s (attempt %d: %s)", BlockedBackoff, attempt, Clip(lastErr, 200))
}

// ShardLabel abbreviates a shard id for human-facing text (details, summaries, blocked
// reasons): the first UUID group, or at most 8 bytes.
func ShardLabel(shard string) string {
	if i := strings.IndexByte(shard, '-'); i > 0 && i <= 8 {
		return shard[:i]
	}
	if len(shard) > 8 {
		return shard[:8]
	}
	return shard
}
