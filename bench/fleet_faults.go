package bench

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// fleetFaults models the object store for the workers: every request pays latency and is counted by
// operation, a listing of the registry or demand index as the pages an object store would serve.
type fleetFaults struct {
	latency time.Duration
	// fleetPrefix starts this fleet's store names ("f3-"); other fleets' requests count apart.
	fleetPrefix string
	listKeys    map[string]int64 // how many keys each paged listing (by prefix) holds

	mu    sync.Mutex
	since time.Time                  // REQUIRES: mu
	byMs  map[int64]map[string]int64 // REQUIRES: mu; requests per op, per millisecond since `since`
	// indexByMs counts ScanDemand's listings per millisecond since `since`. REQUIRES: mu.
	indexByMs map[int64]int64
	other     int64 // REQUIRES: mu
}

// ofOtherFleet says whether a segment of key is a fleet store's name not under prefix.
func ofOtherFleet(key, prefix string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		i := 1
		for i < len(seg) && seg[i] >= '0' && seg[i] <= '9' {
			i++
		}
		if len(seg) > 2 && seg[0] == 'f' && i > 1 && i < len(seg) && seg[i] == '-' && !strings.HasPrefix(seg, prefix) {
			return true
		}
	}
	return false
}

// quiesce waits, at most limit, until no request for another fleet's stores came for quiet, and
// returns how long it waited and how many it saw.
func (f *fleetFaults) quiesce(ctx context.Context, quiet, limit time.Duration) (time.Duration, int64) {
	start := time.Now()
	last, lastChange := f.otherFleets(), time.Now()
	for time.Since(lastChange) < quiet && time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), f.otherFleets()
		case <-time.After(250 * time.Millisecond):
		}
		if n := f.otherFleets(); n != last {
			last, lastChange = n, time.Now()
		}
	}
	return time.Since(start), last
}

// otherFleets returns the requests for other fleets' stores since reset.
func (f *fleetFaults) otherFleets() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.other
}

// isIndexListing says whether a listing of key is a ScanDemand page of a kind's demand index.
func isIndexListing(op, key string) bool {
	return op == objstore.OpList && strings.HasPrefix(key, "_demand/") && strings.Count(key, "/") == 2 && strings.HasSuffix(key, "/")
}

func (f *fleetFaults) Before(op, key string) error {
	pages := int64(1)
	if n, ok := f.listKeys[key]; ok && op == objstore.OpList {
		pages = max(1, (n+listPageKeys-1)/listPageKeys)
	}
	f.mu.Lock()
	if f.fleetPrefix != "" && ofOtherFleet(key, f.fleetPrefix) {
		f.other += pages
	} else if f.byMs != nil {
		ms := time.Since(f.since).Milliseconds()
		m := f.byMs[ms]
		if m == nil {
			m = map[string]int64{}
			f.byMs[ms] = m
		}
		m[op] += pages
		if isIndexListing(op, key) {
			f.indexByMs[ms] += pages
		}
	}
	f.mu.Unlock()
	if f.latency > 0 {
		time.Sleep(time.Duration(pages) * f.latency)
	}
	return nil
}

func (f *fleetFaults) After(op, key string, err error) error { return err }

// reset starts counting from now.
func (f *fleetFaults) reset() {
	f.mu.Lock()
	f.since, f.byMs, f.indexByMs, f.other = time.Now(), map[int64]map[string]int64{}, map[int64]int64{}, 0
	f.mu.Unlock()
}

// indexListsBetween returns the demand-index listing requests issued in [from, until).
func (f *fleetFaults) indexListsBetween(from, until time.Time) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for ms, v := range f.indexByMs {
		at := f.since.Add(time.Duration(ms) * time.Millisecond)
		if !at.Before(from) && at.Before(until) {
			n += v
		}
	}
	return n
}

// countBefore returns the requests issued before `until` (zero = all so far), by operation.
func (f *fleetFaults) countBefore(until time.Time) (int64, map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total int64
	out := map[string]int64{}
	for ms, m := range f.byMs {
		if !until.IsZero() && !f.since.Add(time.Duration(ms)*time.Millisecond).Before(until) {
			continue
		}
		for op, v := range m {
			out[op] += v
			total += v
		}
	}
	return total, out
}
