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

	mu     sync.Mutex
	since  time.Time              // REQUIRES: mu
	counts map[fleetRequest]int64 // REQUIRES: mu; requests since `since`
	other  int64                  // REQUIRES: mu
}

// fleetRequest is what fleetFaults counts requests by: the millisecond since it began counting,
// the operation, and whether the request lists a kind's demand index (a ScanDemand page).
type fleetRequest struct {
	ms    int64
	op    string
	index bool
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
	} else if f.counts != nil {
		f.counts[fleetRequest{time.Since(f.since).Milliseconds(), op, isIndexListing(op, key)}] += pages
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
	f.since, f.counts, f.other = time.Now(), map[fleetRequest]int64{}, 0
	f.mu.Unlock()
}

// requests returns the requests issued in [from, until), only the demand-index listings with
// indexOnly, in all and by operation.
func (f *fleetFaults) requests(from, until time.Time, indexOnly bool) (int64, map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total int64
	byOp := map[string]int64{}
	for r, n := range f.counts {
		if at := f.since.Add(time.Duration(r.ms) * time.Millisecond); (r.index || !indexOnly) && !at.Before(from) && at.Before(until) {
			byOp[r.op] += n
			total += n
		}
	}
	return total, byOp
}
