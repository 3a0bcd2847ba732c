package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseFleetVariants(t *testing.T) {
	vs, err := parseFleetVariants([]string{"16/256", "32/512", "/128", "32/512/eager"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"16/256", "32/512", "32/128", "32/512/eager"}
	if len(vs) != 4 || !vs[3].Eager {
		t.Fatalf("variants %v", vs)
	}
	for i, v := range vs {
		if v.String() != want[i] {
			t.Errorf("variant %d = %s, want %s", i, v, want[i])
		}
	}
	if vs[2].isDefault() || vs[2].Concurrency != 0 || vs[2].Batch != 128 {
		t.Errorf("/128 = %+v", vs[2])
	}
	if vs, err := parseFleetVariants(nil); err != nil || len(vs) != 1 || !vs[0].isDefault() {
		t.Errorf("no variants: %v %v, want one default", vs, err)
	}
	for _, bad := range []string{"32", "0/256", "32/513", "x/256", "32/256/planned", "32/256/lazy", "32/256/planned/eager"} {
		if _, err := parseFleetVariants([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := parseFleetVariants([]string{"32/256", "32/256"}); err == nil {
		t.Error("a variant listed twice accepted")
	}
}

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
	if n, _ := f.countBefore(time.Time{}); n != 2 || f.otherFleets() != 1 {
		t.Errorf("counted %d (want 2), other fleets %d (want 1)", n, f.otherFleets())
	}
}

// Variants of the demand side are reported side by side: a table, targets and values each.
func TestFleetReportVariants(t *testing.T) {
	o := Options{OutDir: t.TempDir()}
	res := newResult("fleet", o)
	a := fleetVariant{Concurrency: 16, Batch: 256}
	b := fleetVariant{Concurrency: 32, Batch: 512}
	var samples []fleetSample
	for _, v := range []fleetVariant{a, b} {
		samples = append(samples,
			fleetSample{Stores: 100, Debt: 1, Variant: v, Duration: time.Second, Requests: 3, Events: 30, Started: 1, TTM: time.Second},
			fleetSample{Stores: 1000, Debt: 10, Variant: v, Duration: time.Second, Requests: 3, Events: 40, Started: 10, TTM: 2 * time.Second},
			fleetSample{Stores: 1000, Debt: 1, FixedDebt: true, Variant: v, Duration: time.Second, Requests: 3, Events: 30, Started: 1, TTM: time.Second})
	}
	fleetReport(res, o, []int{100, 1000}, samples)
	if len(res.Tables) != 2 || !strings.Contains(res.Tables[0].Title, "16/256") || !strings.Contains(res.Tables[1].Title, "32/512") {
		t.Fatalf("tables %d: %v", len(res.Tables), res.Tables)
	}
	for _, key := range []string{"demand_16_256_1000_requests", "demand_32_512_1000_fixed_requests", "demand_32_512_requests_ratio"} {
		if _, ok := res.Values[key]; !ok {
			t.Errorf("value %s missing", key)
		}
	}
}

// quiesce returns once no request for another fleet came for the quiet period, and not
// before: a request within it restarts the wait.
func TestFleetFaultsQuiesce(t *testing.T) {
	f := &fleetFaults{fleetPrefix: "f3-"}
	go func() {
		for range 4 {
			_ = f.Before("get", "generic/f2-0000001/store.json")
			time.Sleep(200 * time.Millisecond)
		}
	}()
	waited, n := f.quiesce(context.Background(), 500*time.Millisecond, 10*time.Second)
	if n != 4 || waited < 1100*time.Millisecond || waited > 5*time.Second {
		t.Errorf("quiesce waited %s and saw %d requests, want 4 and ≥ 1.1 s", waited, n)
	}
}
