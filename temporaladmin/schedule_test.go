package temporaladmin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

func TestScheduleJitter(t *testing.T) {
	for _, c := range []struct{ every, jitter, want time.Duration }{
		{time.Minute, 5 * time.Second, 5 * time.Second},
		{10 * time.Second, 5 * time.Second, 2500 * time.Millisecond},
		{time.Minute, 0, 0},
		{time.Minute, -time.Second, 0},
	} {
		if got := scheduleJitter(c.every, c.jitter); got != c.want {
			t.Errorf("scheduleJitter(%s, %s) = %s, want %s", c.every, c.jitter, got, c.want)
		}
	}
}

// The schedule's action is checked as the window will check it, so a schedule that would
// start only failing windows is never created.
func TestSweepScheduleRefusesAnInputItsWindowsWouldRefuse(t *testing.T) {
	err := EnsureSweepSchedule(t.Context(), nil, SweepSchedule{Every: time.Millisecond, Window: time.Hour})
	require.ErrorContains(t, err, "invalid input: interval: 1ms is below the floor 1s")
	err = EnsureSweepSchedule(t.Context(), nil, SweepSchedule{Every: time.Minute,
		Input: contract.MaintenanceSweepInput{Concurrency: 100_000}})
	require.ErrorContains(t, err, "invalid input: sweep.concurrency: ")
}
