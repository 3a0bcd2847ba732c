package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// A walkeeper-sweep edited outside walkeeper (Temporal Web, the Temporal CLI) to start another
// workflow type, or on another task queue, was triggered by `schedule trigger` and `schedule
// resume` as if it were the sweep, until a worker ensured it again. Now neither triggers it:
// exit 1 with one line naming what it starts, escaped, and `schedule ensure` restores it.
func TestSweepScheduleEditedOutsideWalkeeperIsNotTriggered(t *testing.T) {
	testtemporal.SkipShort(t)
	noDev(t)
	hostPort, c := testtemporal.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// No spec: only a trigger starts anything, so nothing fires on its own during the test.
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:     temporaladmin.SweepScheduleID,
		Spec:   client.ScheduleSpec{},
		Action: &client.ScheduleWorkflowAction{ID: "x", Workflow: "Other\x1b[2J", TaskQueue: contract.TaskQueue},
		Paused: true,
	})
	require.NoError(t, err)
	edit := func(workflow, queue string) {
		require.NoError(t, c.ScheduleClient().GetHandle(ctx, temporaladmin.SweepScheduleID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				s := in.Description.Schedule
				s.Action = &client.ScheduleWorkflowAction{ID: "x", Workflow: workflow, TaskQueue: queue}
				return &client.ScheduleUpdate{Schedule: &s}, nil
			},
		}))
	}
	sweepCLI := func(sub string) (int, string) {
		code, out, errOut := runCLI(t, "schedule", sub, "--temporal", hostPort)
		assert.Empty(t, out)
		return code, errOut
	}
	other := `schedule walkeeper-sweep starts workflow Other\x1b[2J on task queue walkeeper, not SweepWindow on walkeeper ` +
		"(edited outside walkeeper?): not triggered; `walkeeper schedule ensure` restores its action\n"

	code, errOut := sweepCLI("resume")
	assert.Equal(t, cli.ExitFailure, code, errOut)
	assert.Equal(t, "walkeeper: schedule walkeeper-sweep resumed: "+other, errOut)
	code, errOut = sweepCLI("trigger")
	assert.Equal(t, cli.ExitFailure, code, errOut)
	assert.Equal(t, "walkeeper: "+other, errOut)

	edit(contract.SweepWindowWorkflow, "elsewhere")
	code, errOut = sweepCLI("trigger")
	assert.Equal(t, cli.ExitFailure, code, errOut)
	assert.Equal(t, "walkeeper: schedule walkeeper-sweep starts workflow SweepWindow on task queue elsewhere, not SweepWindow "+
		"on walkeeper (edited outside walkeeper?): not triggered; `walkeeper schedule ensure` restores its action\n", errOut)

	d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	assert.Zero(t, d.Info.NumActions, "nothing may have been started")
	assert.Empty(t, d.Info.RunningWorkflows)

	// The remedy the line names: ensure restores the action, and trigger works again.
	code, out, errOut := runCLI(t, "schedule", "ensure", "--every", "1m", "--temporal", hostPort)
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	code, out, errOut = runCLI(t, "schedule", "trigger", "--temporal", hostPort)
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "sweep-window-")
}
