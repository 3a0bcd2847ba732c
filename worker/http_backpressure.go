package worker

import (
	"fmt"
	"net/http"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// Append back-pressure: refuse appends to a shard at --pending-max and start its merge.

// debtKickEvery rate-limits the merge start for a store refusing appends.
const debtKickEvery = 30 * time.Second

// checkDebt refuses an append (too_many_pending, 503 + Retry-After) when this worker's shard
// of the store already lists PendingMax pending generations. The count is the resident
// writer's (store.OwnPending: no I/O).
func (a *apiServer) checkDebt(s *store.Store) error {
	limit := a.cfg.PendingMax
	if limit <= 0 {
		return nil
	}
	pending := s.OwnPending()
	if pending < limit {
		return nil
	}
	a.kickDebtMerge(s.Target(), pending)
	return &apiError{Status: http.StatusServiceUnavailable, Code: CodeTooManyPending, RetryAfter: retryAfterDebt,
		Message: fmt.Sprintf("store %s: this worker's shard has %d pending generations (limit %d); retry after merges catch up",
			s.Target(), pending, limit)}
}

// kickDebtMerge starts (or attaches to) MergeWal for a store refusing appends, in the
// background and at most once per debtKickEvery per store: refused writers produce no seals,
// so the count trigger would not fire again.
func (a *apiServer) kickDebtMerge(t store.Target, pending int) {
	if a.trigger == nil || a.start == nil {
		return
	}
	if !a.kicks.allow(t.String(), time.Now()) {
		return
	}
	a.trigger.fire(TriggerDebt, t, pending, fmt.Sprintf("appends refused: this worker's shard has %d pending generations", pending))
}
