package temporaladmin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// TestTemporalAdmin runs the package against a real dev server that starts without
// walkeeper's search attributes (like a vanilla cluster): registration and schedules must be
// idempotent, updates must reconcile, and pause/resume/trigger/describe must work.
func TestTemporalAdmin(t *testing.T) {
	_, c := testtemporal.StartWithOptions(t, testtemporal.Options{
		NoSearchAttributes: true,
		ExtraNamespaces:    []string{"conflict"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	describe := func(t *testing.T, id string) *client.ScheduleDescription {
		t.Helper()
		d, err := temporaladmin.DescribeSchedule(ctx, c, id)
		require.NoError(t, err)
		return d
	}

	t.Run("search attributes", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			require.NoError(t, temporaladmin.EnsureSearchAttributes(ctx, c, "default"), "call %d", i+1)
		}
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
		require.NoError(t, err)
		for name, typ := range contract.SearchAttributes {
			assert.Equal(t, typ, resp.GetCustomAttributes()[name], name)
		}
	})

	t.Run("search attribute with the wrong type", func(t *testing.T) {
		_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        "conflict",
			SearchAttributes: map[string]enumspb.IndexedValueType{"WalPending": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		})
		require.NoError(t, err)
		err = temporaladmin.EnsureSearchAttributes(ctx, c, "conflict")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WalPending")
	})

	t.Run("sweep schedule", func(t *testing.T) {
		// Ensuring creates it: one SweepWindow per window, a round every Every.
		require.NoError(t, temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{Every: time.Minute, Window: time.Hour}))
		d := describe(t, temporaladmin.SweepScheduleID)
		assertInterval(t, d, time.Hour)
		a := d.Schedule.Action.(*client.ScheduleWorkflowAction)
		assert.Equal(t, contract.SweepWindowWorkflow, a.Workflow)
		assert.Equal(t, contract.TaskQueue, a.TaskQueue)
		assert.Equal(t, temporaladmin.SweepWorkflowID, a.ID)
		require.Len(t, a.Args, 1)
		var in contract.SweepWindowInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(a.Args[0].(*commonpb.Payload), &in))
		assert.Equal(t, time.Minute, in.Interval)
		assert.Equal(t, time.Hour, in.Window)
		assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, d.Schedule.Policy.Overlap)
		assert.Equal(t, time.Minute, d.Schedule.Policy.CatchupWindow)
		assert.False(t, d.Schedule.State.Paused)

		// No window ran, so the ensure started one at once (no worker polls here: it stays
		// running), instead of waiting for the next whole hour.
		var window string
		require.Eventually(t, func() bool {
			d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
			if err != nil || len(d.Info.RunningWorkflows) != 1 {
				return false
			}
			window = d.Info.RunningWorkflows[0].WorkflowID
			return true
		}, 30*time.Second, 200*time.Millisecond)
		assert.Contains(t, window, temporaladmin.SweepWorkflowID+"-")

		// A second ensure (another worker starting) starts no second window.
		require.NoError(t, temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{Every: time.Minute, Window: time.Hour}))
		time.Sleep(time.Second)
		d = describe(t, temporaladmin.SweepScheduleID)
		assert.Len(t, d.Info.RunningWorkflows, 1)

		// Sweep now signals the running window.
		msg, err := temporaladmin.SweepNow(ctx, c)
		require.NoError(t, err)
		assert.Contains(t, msg, "signaled sweep window "+window)
		assert.True(t, historyHas(ctx, t, c, window, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))

		// Pausing the sweep pauses the schedule and cancels the window.
		require.NoError(t, temporaladmin.PauseSchedule(ctx, c, temporaladmin.SweepScheduleID, "maintenance window"))
		d = describe(t, temporaladmin.SweepScheduleID)
		assert.True(t, d.Schedule.State.Paused)
		assert.Equal(t, "maintenance window", d.Schedule.State.Note)
		assert.True(t, historyHas(ctx, t, c, window, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED))

		// Paused and no window running (no worker here to act on the cancel): sweep now runs
		// one MaintenanceSweep instead of starting an hour-long window.
		require.NoError(t, c.TerminateWorkflow(ctx, window, "", "test: the window ended"))
		require.Eventually(t, func() bool {
			d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
			return err == nil && len(d.Info.RunningWorkflows) == 0
		}, 30*time.Second, 200*time.Millisecond)
		msg, err = temporaladmin.SweepNow(ctx, c)
		require.NoError(t, err)
		assert.Contains(t, msg, "is paused: started one MaintenanceSweep "+temporaladmin.SweepWorkflowID+"-now-")
		resp, err := c.DescribeWorkflowExecution(ctx, msg[strings.LastIndex(msg, " ")+1:], "")
		require.NoError(t, err)
		assert.Equal(t, contract.MaintenanceSweepWorkflow, resp.GetWorkflowExecutionInfo().GetType().GetName())

		// The next ensure updates the interval and leaves the operator's pause alone.
		require.NoError(t, temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{Every: time.Minute, Window: 30 * time.Minute}))
		d = describe(t, temporaladmin.SweepScheduleID)
		assertInterval(t, d, 30*time.Minute)
		assert.True(t, d.Schedule.State.Paused, "ensure must not unpause")

		require.NoError(t, temporaladmin.ResumeSchedule(ctx, c, temporaladmin.SweepScheduleID, ""))
		d = describe(t, temporaladmin.SweepScheduleID)
		assert.False(t, d.Schedule.State.Paused)

		assert.Error(t, temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{}))
	})

	t.Run("target schedule", func(t *testing.T) {
		target := store.Target{Kind: store.KindGeneric, Name: "gs"}
		id := temporaladmin.TargetScheduleID(target)
		assert.Equal(t, "merge-wal-tick/generic/gs", id)
		require.NoError(t, temporaladmin.EnsureTargetSchedule(ctx, c, target, time.Hour, temporaladmin.DefaultScheduleJitter))
		require.NoError(t, temporaladmin.EnsureTargetSchedule(ctx, c, target, 2*time.Hour, temporaladmin.DefaultScheduleJitter))
		d := describe(t, id)
		assertInterval(t, d, 2*time.Hour)
		a := d.Schedule.Action.(*client.ScheduleWorkflowAction)
		assert.Equal(t, contract.MergeWalTickWorkflow, a.Workflow)
		assert.Equal(t, id, a.ID)
		require.Len(t, a.Args, 1)
		p, ok := a.Args[0].(*commonpb.Payload)
		require.True(t, ok, "arg is %T", a.Args[0])
		var in map[string]any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &in))
		assert.Equal(t, map[string]any{"target": "generic:gs"}, in)

		require.NoError(t, temporaladmin.PauseSchedule(ctx, c, id, ""))
		require.NoError(t, temporaladmin.ResumeSchedule(ctx, c, id, ""))
		require.NoError(t, temporaladmin.DeleteSchedule(ctx, c, id))
		_, err := temporaladmin.DescribeSchedule(ctx, c, id)
		assert.Error(t, err)
	})
}

// historyHas says whether workflow id's history has an event of type typ.
func historyHas(ctx context.Context, t *testing.T, c client.Client, id string, typ enumspb.EventType) bool {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if e.GetEventType() == typ {
			return true
		}
	}
	return false
}

func assertInterval(t *testing.T, d *client.ScheduleDescription, every time.Duration) {
	t.Helper()
	require.NotNil(t, d.Schedule.Spec)
	require.Len(t, d.Schedule.Spec.Intervals, 1)
	assert.Equal(t, every, d.Schedule.Spec.Intervals[0].Every)
}
