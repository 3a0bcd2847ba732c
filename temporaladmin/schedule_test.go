package temporaladmin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

func TestScheduleJitter(t *testing.T) {
	for _, c := range []struct{ every, jitter, want time.Duration }{
		{time.Minute, 5 * time.Second, 5 * time.Second},
		{10 * time.Second, 5 * time.Second, 2500 * time.Millisecond},
		{time.Minute, 0, 0},
		{time.Minute, -time.Second, 0},
	} {
		require.Equal(t, c.want, scheduleJitter(c.every, c.jitter), "scheduleJitter(%s, %s)", c.every, c.jitter)
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
		return describeAction(&client.ScheduleWorkflowAction{Workflow: contract.SweepWindowWorkflow, Args: []any{p}})
	}
	in, ok := SweepWindowInputOf(describe(`{"sweep":{"max_starts":"x","concurrency":5}}`))
	require.False(t, ok)
	require.Equal(t, contract.SweepWindowInput{}, in)
	in, ok = SweepWindowInputOf(describe(`{"sweep":{"concurrency":5},"interval":30000000000}`))
	require.True(t, ok)
	require.Equal(t, 5, in.Sweep.Concurrency)
	require.Equal(t, 30*time.Second, in.Interval)
}

// describeAction is a description of a schedule whose action is a.
func describeAction(a client.ScheduleAction) *client.ScheduleDescription {
	return &client.ScheduleDescription{Schedule: client.Schedule{Action: a}}
}

// refusedTickOfA is the refusal of target generic:a's schedule, before it names what it found.
func refusedTickOfA() *scheduleForeign {
	return &scheduleForeign{id: "merge-wal-tick/generic/a", want: contract.MergeWalTickWorkflow,
		restore: "walkeeper schedule ensure --target generic:a", marker: ErrTargetScheduleForeign}
}

// What a hand-edited sweep schedule starts is named bounded and escaped, whatever its length
// and bytes, and only walkeeper's own action passes.
func TestCheckSweepActionNamesAForeignActionBounded(t *testing.T) {
	require.NoError(t, checkSweepAction(describeAction(&client.ScheduleWorkflowAction{
		Workflow: contract.SweepWindowWorkflow, TaskQueue: contract.TaskQueue})))

	long := "\x1b[2J" + strings.Repeat("w", 10_000)
	err := checkSweepAction(describeAction(&client.ScheduleWorkflowAction{Workflow: long, TaskQueue: "q\n"}))
	require.ErrorIs(t, err, ErrSweepScheduleForeign)
	require.Contains(t, err.Error(), `starts workflow \x1b[2Jwww`)
	require.Contains(t, err.Error(), `on task queue q\n, not SweepWindow on walkeeper`)
	require.Less(t, len(err.Error()), 400)
	require.NotContains(t, err.Error(), "\x1b")

	err = checkSweepAction(describeAction(nil))
	require.ErrorIs(t, err, ErrSweepScheduleForeign)
	require.Contains(t, err.Error(), "starts workflow (none) on task queue (none)")
}

// A target's schedule edited to start another type, or on another queue, is named as the sweep
// schedule is, with the ensure that restores it; only MergeWalTick on walkeeper passes.
func TestCheckTargetActionNamesAForeignAction(t *testing.T) {
	require.NoError(t, checkAction(describeAction(&client.ScheduleWorkflowAction{
		Workflow: contract.MergeWalTickWorkflow, TaskQueue: contract.TaskQueue}), refusedTickOfA()))
	err := checkAction(describeAction(&client.ScheduleWorkflowAction{Workflow: "Other\x1b[2J", TaskQueue: contract.TaskQueue}), refusedTickOfA())
	require.ErrorIs(t, err, ErrTargetScheduleForeign)
	require.NotErrorIs(t, err, ErrSweepScheduleForeign)
	require.Equal(t, `schedule merge-wal-tick/generic/a starts workflow Other\x1b[2J on task queue walkeeper, not MergeWalTick `+
		"on walkeeper (edited outside walkeeper?): not triggered; `walkeeper schedule ensure --target generic:a` restores its action", err.Error())
	err = checkAction(describeAction(&client.ScheduleWorkflowAction{Workflow: contract.SweepWindowWorkflow, TaskQueue: contract.TaskQueue}), refusedTickOfA())
	require.ErrorIs(t, err, ErrTargetScheduleForeign)
}

// Only a running SweepWindow whose chain the schedule started is a window to cancel: another
// type (an edited action), or a SweepWindow under the ID that the schedule did not start, is not.
func TestForeignWindowIsTheScheduleStarted(t *testing.T) {
	w := client.ScheduleWorkflowExecution{WorkflowID: "sweep-window-x", FirstExecutionRunID: "first"}
	info := func(typ, first string) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{Type: &commonpb.WorkflowType{Name: typ}, FirstRunId: first}
	}
	require.Empty(t, foreignWindow(w, info(contract.SweepWindowWorkflow, "first")))
	require.Empty(t, foreignWindow(w, info(contract.SweepWindowWorkflow, "")), "a server without first run IDs")
	require.Equal(t, `is Other\x1b[2J, not SweepWindow`, foreignWindow(w, info("Other\x1b[2J", "first")))
	require.Equal(t, "is a SweepWindow the schedule did not start", foreignWindow(w, info(contract.SweepWindowWorkflow, "another")))
	err := (&sweepWindowForeign{id: "sweep-window-x", why: "is Other, not SweepWindow", not: "canceled", more: 2})
	require.ErrorIs(t, err, ErrSweepWindowForeign)
	require.Equal(t, "workflow sweep-window-x is Other, not SweepWindow: not canceled (and 2 more) (started outside walkeeper?)", err.Error())
}

// A target's schedule is triggered only when its MergeWalTick's one input names its target:
// the schedule's ID does not decide what the tick merges.
func TestCheckTickTargetNamesAnotherTarget(t *testing.T) {
	asked, err := target.ParseTarget("generic:a")
	require.NoError(t, err)
	describe := func(args ...any) *client.ScheduleDescription {
		var payloads []any
		for _, a := range args {
			p, err := converter.GetDefaultDataConverter().ToPayload(a)
			require.NoError(t, err)
			payloads = append(payloads, p)
		}
		return describeAction(&client.ScheduleWorkflowAction{Workflow: contract.MergeWalTickWorkflow, TaskQueue: contract.TaskQueue, Args: payloads})
	}
	require.NoError(t, checkTickTarget(describe(map[string]any{"target": "generic:a"}), asked, refusedTickOfA()))
	require.NoError(t, checkTickTarget(describe(contract.MergeWalTickInput{Target: "generic:a"}), asked, refusedTickOfA()))
	for _, c := range []struct {
		name string
		d    *client.ScheduleDescription
		got  string
	}{
		{"another target", describe(map[string]any{"target": "generic:b\x1b[2J"}), `generic:b\x1b[2J`},
		{"another kind", describe(map[string]any{"target": "rollout:a"}), "rollout:a"},
		{"not a target", describe(map[string]any{"target": "a"}), "a"},
		{"no target", describe(map[string]any{}), "(unreadable input)"},
		{"no input", describe(), "(unreadable input)"},
		{"two inputs", describe(map[string]any{"target": "generic:a"}, 1), "(unreadable input)"},
		{"not an object", describe("generic:a"), "(unreadable input)"},
		{"raw, not a payload", describeAction(&client.ScheduleWorkflowAction{Args: []any{map[string]any{"target": "generic:a"}}}), "(unreadable input)"},
	} {
		err := checkTickTarget(c.d, asked, refusedTickOfA())
		require.ErrorIs(t, err, ErrTargetScheduleForeign, c.name)
		require.Equal(t, "schedule merge-wal-tick/generic/a starts MergeWalTick for target "+c.got+", not generic:a "+
			"(edited outside walkeeper?): not triggered; `walkeeper schedule ensure --target generic:a` restores its action", err.Error(), c.name)
	}
}
