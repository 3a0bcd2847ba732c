package bench

import (
	"math"
	"testing"
	"time"
)

// The drains' throughput weighs each round by its merges: a round at backlog 0 that took
// twice as long moves it by well under a percent, where a mean of the rounds' rates would
// move by a quarter.
func TestDrainRateWeighsRoundsByWork(t *testing.T) {
	fast := []fairnessRound{{finished: 20, drain: 500 * time.Millisecond}, {finished: 2020, drain: 100 * time.Second}}
	slow := []fairnessRound{{finished: 20, drain: time.Second}, {finished: 2020, drain: 100 * time.Second}}
	if got, want := drainRate(fast), 2040/100.5; math.Abs(got-want) > 1e-9 {
		t.Fatalf("drainRate = %v, want %v", got, want)
	}
	if loss := 1 - drainRate(slow)/drainRate(fast); loss <= 0 || loss > 0.01 {
		t.Fatalf("a backlog-0 round twice as slow costs %.2f %% of the throughput, want (0, 1 %%]", 100*loss)
	}
	if got := drainRate(nil); got != 0 {
		t.Fatalf("drainRate(nil) = %v, want 0", got)
	}
}
