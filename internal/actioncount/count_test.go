package actioncount

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

func event(t enumspb.EventType, attrs func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	ev := &historypb.HistoryEvent{EventType: t}
	if attrs != nil {
		attrs(ev)
	}
	return ev
}

func marker(name string, task int64) *historypb.HistoryEvent {
	return event(enumspb.EVENT_TYPE_MARKER_RECORDED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: name, WorkflowTaskCompletedEventId: task,
		}}
	})
}

func upsert(names ...string) *historypb.HistoryEvent {
	fields := map[string]*commonpb.Payload{}
	for _, n := range names {
		fields[n] = &commonpb.Payload{}
	}
	return event(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
		}}
	})
}

func activity(name string, attempt int32) []*historypb.HistoryEvent {
	return []*historypb.HistoryEvent{
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: name},
			}}
		}),
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				Attempt: attempt,
			}}
		}),
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, nil),
	}
}

// One history with one of each kind of action, and the events that cost nothing.
func TestEventsCountsTemporalCloudActions(t *testing.T) {
	h := []*historypb.HistoryEvent{
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, nil), // free, but not the happy path
		// Two local activities of workflow task 4: one action; one of task 9: another.
		marker(markerLocalActivity, 4), marker(markerLocalActivity, 4), marker(markerLocalActivity, 9),
		marker(markerVersion, 4),             // free
		marker("SideEffect", 4),              // one
		upsert("TemporalChangeVersion"),      // free
		upsert("WalPending", "WalReclaimed"), // one, however many attributes
		event(enumspb.EVENT_TYPE_TIMER_STARTED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED, nil),        // the memo: not billed
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, nil), // the next run's start
	}
	h = append(h, activity("Prepare", 1)...)
	h = append(h, activity("CommitRound", 3)...) // two retries before the recorded attempt
	c := Events(h)
	require.Equal(t, 1, c.Starts)
	require.Equal(t, 4, c.Activities)
	require.Equal(t, 2, c.Retries)
	require.Equal(t, map[string]int{"Prepare": 1, "CommitRound": 1}, c.ActivitiesByType)
	require.Equal(t, 2, c.LocalActivityTasks)
	require.Equal(t, 3, c.LocalActivities)
	require.Equal(t, 1, c.Upserts)
	require.Equal(t, map[string]int{"WalPending": 1, "WalReclaimed": 1}, c.UpsertsBySearchAttribute)
	require.Equal(t, 1, c.MemoUpdates)
	require.Equal(t, 1, c.WorkflowTaskTimeouts)
	// start 1 + activities 4 + local-activity tasks 2 + side effect 1 + upsert 1 + timer 1 + signal 1
	require.Equal(t, 11, c.Actions)
	require.Equal(t, len(h), c.Events)

	var sum Cost
	sum.Add(c)
	sum.Add(c)
	require.Equal(t, 22, sum.Actions)
	require.Equal(t, 2, sum.Runs)
	require.Equal(t, 2, sum.ActivitiesByType["Prepare"])
	require.Equal(t, 2, sum.WorkflowTaskTimeouts)
}

func TestUSDPerMillion(t *testing.T) {
	// 6 actions for 4 generations: 1.5 actions each, $75 per million generations.
	require.InDelta(t, 75.0, USDPerMillion(6, 4), 1e-9)
	require.Zero(t, USDPerMillion(6, 0))
}
