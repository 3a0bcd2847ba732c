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

// Each round's light p99 is judged against its own repetition's unloaded p99: a slow
// repetition does not lend its looser limit to a fast one, and the verdict names the round
// furthest over its limit.
func TestWorstLightP99JudgesEachRepetitionByItsOwnUnloadedRound(t *testing.T) {
	round := func(rep int, backlog int, p99 time.Duration) fairnessRound {
		return fairnessRound{rep: rep, backlog: backlog, light: durStats{P99: p99}}
	}
	met := []fairnessRound{
		round(0, 0, 500*time.Millisecond), round(0, 400, 1900*time.Millisecond),
		round(1, 0, 2*time.Second), round(1, 400, 4*time.Second),
	}
	unloaded, limit, worst, ok := worstLightP99(met)
	if !ok || unloaded != 500*time.Millisecond || limit != 2*time.Second || worst != 1900*time.Millisecond {
		t.Fatalf("met: got unloaded %v limit %v worst %v met %v; want 500ms 2s 1.9s true", unloaded, limit, worst, ok)
	}
	// The same 2.5 s behind 400 meets the second repetition's limit (5 s) but not the first's.
	missed := []fairnessRound{
		round(0, 0, 500*time.Millisecond), round(0, 400, 2500*time.Millisecond),
		round(1, 0, 2*time.Second), round(1, 400, 2500*time.Millisecond),
	}
	unloaded, limit, worst, ok = worstLightP99(missed)
	if ok || unloaded != 500*time.Millisecond || limit != 2*time.Second || worst != 2500*time.Millisecond {
		t.Fatalf("missed: got unloaded %v limit %v worst %v met %v; want 500ms 2s 2.5s false", unloaded, limit, worst, ok)
	}
}
