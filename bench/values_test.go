package bench

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"testing"
)

// value returns the scenario's value under key and stops the test when the scenario did not
// report it, or reported NaN or ±Inf. A missing key would read as 0 and a NaN compares false,
// so either would silently pass a bound: renaming a key in bench/*.go, or a phase that
// measured nothing (0/0), must fail the smoke test instead.
func value(t testing.TB, res *Result, key string) float64 {
	t.Helper()
	v, ok := res.Values[key]
	if !ok {
		keys := make([]string, 0, len(res.Values))
		for k := range res.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("%s: no value %q; the scenario reported %v", res.Scenario, key, keys)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		t.Fatalf("%s: value %q = %v: nothing was measured", res.Scenario, key, v)
	}
	return v
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine,
// as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestValueFailsOnMissingKeyAndNaN(t *testing.T) {
	res := &Result{Scenario: "s", Values: map[string]float64{"ok": 2, "zero": 0, "nan": math.NaN(), "inf": math.Inf(1)}}
	call := func(key string) (float64, string) {
		r := &fatalRecorder{TB: t}
		var v float64
		done := make(chan struct{})
		go func() {
			defer close(done)
			v = value(r, res, key)
		}()
		<-done
		return v, r.msg
	}
	if v, msg := call("ok"); v != 2 || msg != "" {
		t.Fatalf("value(ok) = %v, %q", v, msg)
	}
	if v, msg := call("zero"); v != 0 || msg != "" {
		t.Fatalf("value(zero) = %v, %q: a measured 0 is a value", v, msg)
	}
	for _, k := range []string{"missing", "nan", "inf"} {
		if _, msg := call(k); msg == "" {
			t.Errorf("value(%s) did not fail the test", k)
		} else {
			t.Logf("value(%s): %s", k, msg)
		}
	}
}
