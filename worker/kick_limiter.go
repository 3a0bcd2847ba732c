package worker

import (
	"sync"
	"time"
)

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
