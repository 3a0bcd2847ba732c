package bench

import (
	"context"
	"testing"
	"time"
)

// A request for a store of an earlier fleet (its terminated merges' activities reaching this
// fleet's workers) is told apart from this fleet's and from the shared listings.
func TestOfOtherFleet(t *testing.T) {
	for key, other := range map[string]bool{
		"generic/f1-0000100/store.json":       true,
		"_demand/generic/f12-0000003.10.json": true,
		"generic/f3-0000100/store.json":       false,
		"_demand/generic/f3-0000100.json":     false,
		"_registry/generic/":                  false,
		"_demand/generic/":                    false,
		"generic/fleet-template-name/x":       false,
		"generic/f3-w1/wal/0001":              false,
	} {
		if got := ofOtherFleet(key, "f3-"); got != other {
			t.Errorf("ofOtherFleet(%q) = %v, want %v", key, got, other)
		}
	}
	f := &fleetFaults{fleetPrefix: "f3-"}
	f.reset()
	for _, k := range []string{"generic/f1-0000100/store.json", "generic/f3-0000100/store.json", "_demand/generic/"} {
		_ = f.Before("get", k)
	}
	if n, _ := f.requests(time.Time{}, time.Now(), false); n != 2 || f.otherFleets() != 1 {
		t.Errorf("counted %d (want 2), other fleets %d (want 1)", n, f.otherFleets())
	}
}

// quiesce returns once no request for another fleet came for the quiet period, and not
// before: a request within it restarts the wait. The requests come far inside the quiet
// period, so only a scheduler stall of most of it could end the wait early.
func TestFleetFaultsQuiesce(t *testing.T) {
	const (
		quiet = 2 * time.Second
		gap   = 100 * time.Millisecond
		limit = 30 * time.Second
	)
	f := &fleetFaults{fleetPrefix: "f3-"}
	go func() {
		for range 4 {
			_ = f.Before("get", "generic/f2-0000001/store.json")
			time.Sleep(gap)
		}
	}()
	waited, n := f.quiesce(context.Background(), quiet, limit)
	if n != 4 || waited < quiet+3*gap || waited >= limit {
		t.Errorf("quiesce waited %s and saw %d requests, want 4 and at least %s, the quiet period after the last", waited, n, quiet+3*gap)
	}
}
