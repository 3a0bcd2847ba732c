package bench

import (
	"fmt"
	"strings"
	"testing"
)

// Result.params takes key, value pairs: a key without its value is a bug in the scenario, and
// it must stop the run rather than drop the key from the printed and saved parameters.
func TestParamsRefusesAKeyWithoutAValue(t *testing.T) {
	res := &Result{Scenario: "s"}
	res.params("reps", 3, "storage", "mem://")
	if got := fmt.Sprint(res.Params); got != "[{reps 3} {storage mem://}]" {
		t.Fatalf("params = %s", got)
	}
	defer func() {
		msg := fmt.Sprint(recover())
		if !strings.Contains(msg, "key orphan has no value") {
			t.Fatalf("params with an odd count: recovered %q, want a panic naming the key", msg)
		}
		if len(res.Params) != 2 {
			t.Errorf("params after the refused call = %v, want the first two only", res.Params)
		}
	}()
	res.params("latency", "10ms", "orphan")
}
