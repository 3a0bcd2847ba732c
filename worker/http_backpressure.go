package worker

import (
	"errors"
	"fmt"
	"sync"
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
	if !errors.Is(err, store.ErrTooManyPending) || a.triggers.start == nil {
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

// kickLimiter lets something happen at most once per every for each key, forgetting keys
// older than every as it goes.
type kickLimiter struct {
	every time.Duration

	mu      sync.Mutex
	last    map[string]time.Time // key -> when it was last allowed
	pruneAt int                  // prune when last grows to this many entries
}

// minKickPrune is the smallest size at which the limiter prunes.
const minKickPrune = 64

// allow reports whether key may go now, and if so records it.
func (k *kickLimiter) allow(key string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if last, ok := k.last[key]; ok && now.Sub(last) < k.every {
		return false
	}
	if k.last == nil {
		k.last = map[string]time.Time{}
	}
	k.last[key] = now
	if len(k.last) >= k.pruneAt {
		for key, at := range k.last {
			if now.Sub(at) >= k.every {
				delete(k.last, key)
			}
		}
		// Amortised: the next prune waits until the map has doubled.
		k.pruneAt = max(2*len(k.last), minKickPrune)
	}
	return true
}

// forget lets key go again at once: what it was allowed for did not happen.
func (k *kickLimiter) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.last, key)
}
