package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// Write back-pressure: the store refuses appends and deletes to a shard at --pending-max
// (store.ErrTooManyPending: 503 too_many_pending + Retry-After); the worker then starts the
// store's merge.

// debtKickEvery rate-limits the merge start for a store refusing appends.
const debtKickEvery = 30 * time.Second

// kickIfRefused starts (or attaches to) the MergeWal of a store whose write was refused for
// its pending debt, in the background and at most once per debtKickEvery per store: refused
// writers produce no seals, so the count trigger would not fire again.
func (a *apiServer) kickIfRefused(s *store.Store, err error) {
	if !errors.Is(err, store.ErrTooManyPending) || a.triggers == nil || a.start == nil {
		return
	}
	t, pending := s.Target(), s.OwnPending()
	if a.kicks.allow(t.String(), time.Now()) {
		a.triggers.fire(TriggerDebt, t, pending, fmt.Sprintf("appends refused: this worker's shard has %d pending generations", pending))
	}
}
