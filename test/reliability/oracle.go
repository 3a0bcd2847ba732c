package reliability

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Oracle is the set of appends a test made, per key: the newest ACKNOWLEDGED value and the
// values whose append returned an error or never returned (the process died): those may or
// may not have landed, so a read may show them, but only if they are newer than the
// acknowledged one.
//
// The values written to one key must increase and one key must be written by one sequential
// writer (one goroutine of one shard), so "newest" means "largest" without relying on clocks:
// the store orders versions by its write sequence, which increases with every append of a
// shard; a later call of the same goroutine gets a larger sequence.
type Oracle struct {
	mu   sync.Mutex
	keys map[string]*keyState
}

type keyState struct {
	acked  int64   // -1 = nothing acknowledged
	maybe  []int64 // attempted, not acknowledged, > acked
	maxTry int64
}

// NewOracle returns an empty oracle.
func NewOracle() *Oracle { return &Oracle{keys: map[string]*keyState{}} }

func (o *Oracle) state(key string) *keyState {
	st := o.keys[key]
	if st == nil {
		st = &keyState{acked: -1, maxTry: -1}
		o.keys[key] = st
	}
	return st
}

// Attempt records that value is about to be appended to key (call before Append).
func (o *Oracle) Attempt(key string, value int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.state(key)
	if value <= st.maxTry {
		panic(fmt.Sprintf("oracle: key %s: value %d not above %d", key, value, st.maxTry))
	}
	st.maxTry = value
	st.maybe = append(st.maybe, value)
}

// Ack records that the append of value to key was acknowledged.
func (o *Oracle) Ack(key string, value int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.state(key)
	if value > st.acked {
		st.acked = value
	}
	st.maybe = slices.DeleteFunc(st.maybe, func(v int64) bool { return v <= st.acked })
}

// Acked returns the newest acknowledged value of key (ok false if none).
func (o *Oracle) Acked(key string) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.keys[key]
	if st == nil || st.acked < 0 {
		return 0, false
	}
	return st.acked, true
}

// Keys returns every key ever attempted, sorted.
func (o *Oracle) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.keys))
}

// Counts returns how many keys have an acknowledged value and how many are attempted only.
func (o *Oracle) Counts() (acked, unacked int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, st := range o.keys {
		if st.acked >= 0 {
			acked++
		} else {
			unacked++
		}
	}
	return
}

// Allowed reports whether a read of key may return value (present) or nothing (!present).
func (o *Oracle) Allowed(key string, value int64, present bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.keys[key]
	if st == nil {
		if present {
			return fmt.Errorf("key %s: read %d but nothing was ever appended", key, value)
		}
		return nil
	}
	if !present {
		if st.acked >= 0 {
			return fmt.Errorf("key %s: LOST: acknowledged value %d not readable", key, st.acked)
		}
		return nil
	}
	if value == st.acked || slices.Contains(st.maybe, value) {
		return nil
	}
	if value < st.acked {
		return fmt.Errorf("key %s: STALE: read %d, acknowledged %d", key, value, st.acked)
	}
	return fmt.Errorf("key %s: read %d, never written (acknowledged %d, unacknowledged %v)", key, value, st.acked, st.maybe)
}

// Verify checks a full read of the store (key -> value) against the oracle: every
// acknowledged key present with its newest value or a newer unacknowledged one, nothing
// that was never written. It returns every violation (empty = pass).
func (o *Oracle) Verify(rows map[string]int64) []string {
	var bad []string
	keys := append(o.Keys(), slices.Collect(maps.Keys(rows))...)
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		v, ok := rows[k]
		if err := o.Allowed(k, v, ok); err != nil {
			bad = append(bad, err.Error())
		}
	}
	slices.Sort(bad)
	return bad
}
