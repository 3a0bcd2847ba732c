package contract

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
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

// InFlightActivity is one activity a MergeWal or CompactBase run waits on, as its status
// query lists it. The server's view of the same activity (DescribeWorkflowExecution's
// pending activities, matched by ID) tells whether a worker has picked it up.
type InFlightActivity struct {
	ID       string `json:"id"`
	Activity string `json:"activity"`
	Shard    string `json:"shard,omitempty"`
	Queue    string `json:"queue"`
}

// slotBlocked is the blocked reason of activity a as the server reports it (pa) at now: one
// scheduled and not started for at least threshold waits for a slot (or a gone worker); a
// retry waiting for its attempt backs off; "" otherwise. Pure.
func slotBlocked(a InFlightActivity, pa *workflowpb.PendingActivityInfo, now time.Time, threshold time.Duration) string {
	if pa == nil || pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_SCHEDULED || threshold <= 0 {
		return ""
	}
	if next := pa.GetNextAttemptScheduleTime(); next != nil && next.AsTime().After(now) {
		return BackoffReason(int(pa.GetAttempt())-1, pa.GetLastFailure().GetMessage())
	}
	since := pa.GetScheduledTime().AsTime()
	if next := pa.GetNextAttemptScheduleTime(); next != nil && next.AsTime().After(since) {
		since = next.AsTime()
	}
	if now.Sub(since) < threshold {
		return ""
	}
	// On a shard's own queue the worker may be gone; on the shared queue every slot is busy.
	if a.Queue != TaskQueue && a.Shard != "" {
		return BlockedNoWorker + " " + ShardLabel(a.Shard)
	}
	return BlockedSlot + " on " + a.Queue
}

// pendingByID indexes a DescribeWorkflowExecution answer's pending activities.
func pendingByID(pending []*workflowpb.PendingActivityInfo) map[string]*workflowpb.PendingActivityInfo {
	m := make(map[string]*workflowpb.PendingActivityInfo, len(pending))
	for _, pa := range pending {
		m[pa.GetActivityId()] = pa
	}
	return m
}

// ApplyPending completes st with what only the server knows: which in-flight activities no
// worker has started or wait for a retry, keeping a reason the workflow reported itself.
func (st *MergeWalStatus) ApplyPending(pending []*workflowpb.PendingActivityInfo, now time.Time) {
	byID := pendingByID(pending)
	for _, a := range st.InFlight {
		reason := slotBlocked(a, byID[a.ID], now, st.SlotWait)
		if reason == "" {
			continue
		}
		for i := range st.Shards {
			if a.Shard != "" && st.Shards[i].Shard == a.Shard && st.Shards[i].Blocked == "" {
				st.Shards[i].Blocked = reason
			}
		}
		if st.Blocked == "" {
			if a.Shard != "" {
				reason = "shard " + ShardLabel(a.Shard) + ": " + reason
			}
			st.Blocked = reason
		}
	}
}

// ApplyPending is MergeWalStatus.ApplyPending for CompactBase.
func (st *CompactBaseStatus) ApplyPending(pending []*workflowpb.PendingActivityInfo, now time.Time) {
	byID := pendingByID(pending)
	for _, a := range st.InFlight {
		if reason := slotBlocked(a, byID[a.ID], now, st.SlotWait); reason != "" && st.Blocked == "" {
			st.Blocked = reason
		}
	}
}
