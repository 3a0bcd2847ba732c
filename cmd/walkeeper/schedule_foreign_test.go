package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// A walkeeper-sweep edited outside walkeeper (Temporal Web, the Temporal CLI) to start another
// workflow type, or on another task queue, was triggered by `schedule trigger` and `schedule
// resume` as if it were the sweep, until a worker ensured it again. Now neither triggers it:
// exit 1 with one line naming what it starts, escaped, and `schedule ensure` restores it.
func TestSweepScheduleEditedOutsideWalkeeperIsNotTriggered(t *testing.T) {
	tn, c, ctx := scheduleTemporal(t)
	createPausedSchedule(ctx, t, c, temporaladmin.SweepScheduleID, &client.ScheduleWorkflowAction{ID: "x", Workflow: "Other\x1b[2J", TaskQueue: contract.TaskQueue})
	other := `schedule walkeeper-sweep starts workflow Other\x1b[2J on task queue walkeeper, not SweepWindow on walkeeper ` +
		"(edited outside walkeeper?): not triggered; `walkeeper schedule ensure` restores its action\n"

	tn.refused(t, cli.ExitFailure, "walkeeper: schedule walkeeper-sweep resumed: "+other, "schedule", "resume")
	tn.refused(t, cli.ExitFailure, "walkeeper: "+other, "schedule", "trigger")

	setScheduleAction(ctx, t, c, temporaladmin.SweepScheduleID, &client.ScheduleWorkflowAction{ID: "x", Workflow: contract.SweepWindowWorkflow, TaskQueue: "elsewhere"})
	tn.refused(t, cli.ExitFailure, "walkeeper: schedule walkeeper-sweep starts workflow SweepWindow on task queue elsewhere, not SweepWindow "+
		"on walkeeper (edited outside walkeeper?): not triggered; `walkeeper schedule ensure` restores its action\n", "schedule", "trigger")

	d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	assert.Zero(t, d.Info.NumActions, "nothing may have been started")
	assert.Empty(t, d.Info.RunningWorkflows)

	// The remedy the line names: ensure restores the action, and trigger works again.
	tn.ok(t, "schedule", "ensure", "--every", "1m")
	assert.Contains(t, tn.ok(t, "schedule", "trigger"), "sweep-window-")
}

// `schedule pause` (and temporaladmin.DeleteSchedule) canceled whatever ran under a window's
// ID, so a walkeeper-sweep edited to start another type had that workflow canceled as if it
// were a window. Now it is left running and named: the schedule is paused (or deleted) and
// says so, exit 1, one line, escaped.
func TestSweepSchedulePauseCancelsOnlyItsWindows(t *testing.T) {
	tn, c, ctx := scheduleTemporal(t)
	running := sweepScheduleStartingAnotherType(ctx, t, c)
	refused := "workflow " + running + ` is Other\x1b[2J, not SweepWindow: not canceled (started outside walkeeper?)`

	tn.refused(t, cli.ExitFailure, "walkeeper: schedule walkeeper-sweep paused: "+refused+"\n", "schedule", "pause")
	d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	assert.True(t, d.Schedule.State.Paused)

	err = temporaladmin.DeleteSchedule(ctx, c, temporaladmin.SweepScheduleID)
	assert.ErrorIs(t, err, temporaladmin.ErrSweepWindowForeign)
	assert.EqualError(t, err, "schedule walkeeper-sweep deleted: "+refused)
	_, err = temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	assert.Error(t, err, "the schedule is deleted")

	assertNoEvent(ctx, t, c, running, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED, "the workflow was canceled")
}

// `schedule trigger --target` ran whatever a target's schedule had been edited to start. Now
// it describes the schedule first and refuses another type or queue, exit 1, one line naming
// it escaped, triggering nothing; walkeeper's own action is triggered as before.
func TestTargetScheduleEditedOutsideWalkeeperIsNotTriggered(t *testing.T) {
	tn, c, ctx := scheduleTemporal(t)
	id := "merge-wal-tick/generic/edited"
	createPausedSchedule(ctx, t, c, id, &client.ScheduleWorkflowAction{ID: id, Workflow: "Other\x1b[2J", TaskQueue: contract.TaskQueue})
	edit := func(workflow, queue string) {
		setScheduleAction(ctx, t, c, id, &client.ScheduleWorkflowAction{ID: id, Workflow: workflow, TaskQueue: queue,
			Args: []any{map[string]any{"target": "generic:edited"}}})
	}
	trigger := []string{"schedule", "trigger", "--target", "generic:edited"}
	restore := "(edited outside walkeeper?): not triggered; `walkeeper schedule ensure --target generic:edited` restores its action\n"

	tn.refused(t, cli.ExitFailure, `walkeeper: schedule merge-wal-tick/generic/edited starts workflow Other\x1b[2J on task queue walkeeper, `+
		"not MergeWalTick on walkeeper "+restore, trigger...)
	edit(contract.MergeWalTickWorkflow, "elsewhere")
	tn.refused(t, cli.ExitFailure, "walkeeper: schedule merge-wal-tick/generic/edited starts workflow MergeWalTick on task queue elsewhere, "+
		"not MergeWalTick on walkeeper "+restore, trigger...)
	d, err := temporaladmin.DescribeSchedule(ctx, c, id)
	require.NoError(t, err)
	assert.Zero(t, d.Info.NumActions, "nothing may have been started")

	edit(contract.MergeWalTickWorkflow, contract.TaskQueue)
	assert.Equal(t, "schedule "+id+" triggered\n", tn.ok(t, trigger...))
	require.Eventually(t, func() bool {
		d, err := temporaladmin.DescribeSchedule(ctx, c, id)
		return err == nil && d.Info.NumActions == 1
	}, 30*time.Second, 200*time.Millisecond)
}

// `schedule trigger` signaled whatever ran under a sweep window's ID, by ID alone, once the
// schedule's action was walkeeper's again: a workflow of another type the schedule had started
// while edited got walkeeper-sweep-now. Now the workflow is described first and one that is
// not the schedule's SweepWindow is not signaled: exit 1, one line naming it, escaped.
func TestSweepTriggerSignalsOnlyItsWindows(t *testing.T) {
	tn, c, ctx := scheduleTemporal(t)
	running := sweepScheduleStartingAnotherType(ctx, t, c)
	// The action is walkeeper's again; the workflow it started while edited still runs.
	setScheduleAction(ctx, t, c, temporaladmin.SweepScheduleID, &client.ScheduleWorkflowAction{ID: temporaladmin.SweepWorkflowID, Workflow: contract.SweepWindowWorkflow, TaskQueue: contract.TaskQueue})

	tn.refused(t, cli.ExitFailure, "walkeeper: workflow "+running+` is Other\x1b[2J, not SweepWindow: not signaled (started outside walkeeper?)`+"\n",
		"schedule", "trigger")
	_, err := temporaladmin.SweepNow(ctx, c)
	assert.ErrorIs(t, err, temporaladmin.ErrSweepWindowForeign)

	assertNoEvent(ctx, t, c, running, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, "the workflow was signaled")
	d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	assert.EqualValues(t, 1, d.Info.NumActions, "the trigger may not have started a window either")
}

// `schedule trigger --target T` triggered T's schedule whatever target its MergeWalTick input
// named, so a schedule edited to name another store merged that one as if it were T. Now the
// input must name T: exit 1, one line naming the target found, escaped, triggering nothing.
func TestTargetScheduleForAnotherTargetIsNotTriggered(t *testing.T) {
	tn, c, ctx := scheduleTemporal(t)
	id := "merge-wal-tick/generic/asked"
	restore := " (edited outside walkeeper?): not triggered; `walkeeper schedule ensure --target generic:asked` restores its action\n"
	for _, tc := range []struct {
		name string
		args []any
		got  string
	}{
		{"another target", []any{map[string]any{"target": "generic:other\x1b[2J"}}, `generic:other\x1b[2J`},
		{"no input", nil, "(unreadable input)"},
		{"two inputs", []any{map[string]any{"target": "generic:asked"}, 1}, "(unreadable input)"},
		{"not an object", []any{"generic:asked"}, "(unreadable input)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			createPausedSchedule(ctx, t, c, id, &client.ScheduleWorkflowAction{ID: id, Workflow: contract.MergeWalTickWorkflow, TaskQueue: contract.TaskQueue, Args: tc.args})
			defer func() { require.NoError(t, temporaladmin.DeleteSchedule(context.WithoutCancel(ctx), c, id)) }()
			tn.refused(t, cli.ExitFailure, "walkeeper: schedule "+id+" starts MergeWalTick for target "+tc.got+", not generic:asked"+restore,
				"schedule", "trigger", "--target", "generic:asked")
			d, err := temporaladmin.DescribeSchedule(ctx, c, id)
			require.NoError(t, err)
			assert.Zero(t, d.Info.NumActions, "nothing may have been started")
		})
	}
}

// sweepScheduleStartingAnotherType creates walkeeper-sweep edited to start a workflow of
// another type on a queue no worker polls, so that what its trigger starts stays running, and
// returns that workflow's ID; the workflow is terminated when the test ends.
func sweepScheduleStartingAnotherType(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	createPausedSchedule(ctx, t, c, temporaladmin.SweepScheduleID, &client.ScheduleWorkflowAction{ID: temporaladmin.SweepWorkflowID, Workflow: "Other\x1b[2J", TaskQueue: "walkeeper-test-unpolled"})
	require.NoError(t, temporaladmin.TriggerSchedule(ctx, c, temporaladmin.SweepScheduleID))
	var running string
	require.Eventually(t, func() bool {
		d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
		if err != nil || len(d.Info.RunningWorkflows) != 1 {
			return false
		}
		running = d.Info.RunningWorkflows[0].WorkflowID
		return true
	}, 30*time.Second, 200*time.Millisecond)
	require.Contains(t, running, temporaladmin.SweepWorkflowID+"-")
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.WithoutCancel(ctx), running, "", "test done") })
	return running
}

// scheduleTemporal is a namespace for a test that edits schedules behind walkeeper's back,
// with a context that bounds the whole test.
func scheduleTemporal(t *testing.T) (temporalNS, client.Client, context.Context) {
	t.Helper()
	tn := newTemporalNS(t)
	noDev(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return tn, tn.c, ctx
}

// createPausedSchedule creates schedule id with no spec, so that only a trigger starts
// anything and nothing fires on its own during the test.
func createPausedSchedule(ctx context.Context, t *testing.T, c client.Client, id string, action *client.ScheduleWorkflowAction) {
	t.Helper()
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: id, Spec: client.ScheduleSpec{}, Action: action, Paused: true})
	require.NoError(t, err)
}

// setScheduleAction edits schedule id's action as Temporal Web or the Temporal CLI would.
func setScheduleAction(ctx context.Context, t *testing.T, c client.Client, id string, action *client.ScheduleWorkflowAction) {
	t.Helper()
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Action = action
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	}))
}

// assertNoEvent asserts that workflow id's history holds no event of type typ.
func assertNoEvent(ctx context.Context, t *testing.T, c client.Client, id string, typ enumspb.EventType, msg string) {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		assert.NotEqual(t, typ, e.GetEventType(), msg)
	}
}
