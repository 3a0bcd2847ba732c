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
	key := t.String()
	if !a.kicks.allow(key, time.Now()) {
		return
	}
	if !a.triggers.fire(TriggerDebt, t, pending, fmt.Sprintf("appends refused: this worker's shard has %d pending generations", pending)) &&
		a.triggers.crowdedOut(key) {
		// Other stores' starts filled every slot and none of this store's is in flight: the
		// next refused write tries again rather than wait debtKickEvery.
		a.kicks.forget(key)
	}
}
