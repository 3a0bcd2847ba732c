package temporaladmin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"

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

// A schedule whose window input holds a value of the wrong type reads as unreadable, so a
// sweep started by hand while the schedule is paused takes the default thresholds, not the
// fields that happened to decode.
func TestSweepWindowInputOfAWrongTypedInputIsUnreadable(t *testing.T) {
	describe := func(input string) *client.ScheduleDescription {
		p := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(input)}
		return &client.ScheduleDescription{Schedule: client.Schedule{Action: &client.ScheduleWorkflowAction{
			Workflow: contract.SweepWindowWorkflow, Args: []any{p}}}}
	}
	in, ok := SweepWindowInputOf(describe(`{"sweep":{"max_starts":"x","concurrency":5}}`))
	require.False(t, ok)
	require.Equal(t, contract.SweepWindowInput{}, in)
	in, ok = SweepWindowInputOf(describe(`{"sweep":{"concurrency":5},"interval":30000000000}`))
	require.True(t, ok)
	require.Equal(t, 5, in.Sweep.Concurrency)
	require.Equal(t, 30*time.Second, in.Interval)
}

// What a hand-edited sweep schedule starts is named bounded and escaped, whatever its length
// and bytes, and only walkeeper's own action passes.
func TestCheckSweepActionNamesAForeignActionBounded(t *testing.T) {
	describe := func(a client.ScheduleAction) *client.ScheduleDescription {
		return &client.ScheduleDescription{Schedule: client.Schedule{Action: a}}
	}
	require.NoError(t, checkSweepAction(describe(&client.ScheduleWorkflowAction{
		Workflow: contract.SweepWindowWorkflow, TaskQueue: contract.TaskQueue})))

	long := "\x1b[2J" + strings.Repeat("w", 10_000)
	err := checkSweepAction(describe(&client.ScheduleWorkflowAction{Workflow: long, TaskQueue: "q\n"}))
	require.ErrorIs(t, err, ErrSweepScheduleForeign)
	require.Contains(t, err.Error(), `starts workflow \x1b[2Jwww`)
	require.Contains(t, err.Error(), `on task queue q\n, not SweepWindow on walkeeper`)
	require.Less(t, len(err.Error()), 400)
	require.NotContains(t, err.Error(), "\x1b")

	err = checkSweepAction(describe(nil))
	require.ErrorIs(t, err, ErrSweepScheduleForeign)
	require.Contains(t, err.Error(), "starts workflow (none) on task queue (none)")
}
