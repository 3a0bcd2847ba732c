package bench

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// mergeWaits is where one MergeWal run's time went, from its history: its tasks' queue waits and
// its first event to its last.
type mergeWaits struct {
	// run is the first event to the last.
	run time.Duration
	// firstTask is the first workflow task's wait (scheduled to started); 0 when the start
	// handed it over in its answer (eager).
	firstTask time.Duration
	// laterTasks sums the other workflow tasks' waits (the worker's sticky queue, or the
	// shared queue after a sticky timeout).
	laterTasks time.Duration
	// activities sums the activities' waits on the shard queues.
	activities time.Duration
}

// waitsOf reads the waits of workflow id's latest run from its history.
func waitsOf(ctx context.Context, c client.Client, id string) (mergeWaits, error) {
	var w mergeWaits
	scheduled := map[int64]time.Time{}
	tasks := 0
	events, err := actioncount.History(ctx, c, id, "")
	if err != nil {
		return w, err
	}
	for _, ev := range events {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wait := at.Sub(scheduled[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()])
			if tasks == 0 {
				w.firstTask = wait
			} else {
				w.laterTasks += wait
			}
			tasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			w.activities += at.Sub(scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()])
		}
	}
	if len(events) > 0 {
		w.run = events[len(events)-1].GetEventTime().AsTime().Sub(events[0].GetEventTime().AsTime())
	}
	return w, nil
}
