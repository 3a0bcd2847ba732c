// Package actioncount counts the Temporal Cloud billable actions a workflow run recorded, from
// its event history, so tests, benchmarks and `walkeeper history` agree on one figure. It follows
// docs.temporal.io/cloud/actions as far as a history shows it (Events says which event counts;
// docs/TEMPORAL.md "What a merge and a sweep cost in actions"): an activity's earlier attempts
// from the attempt its started event records, a signal where it is received and not again in its
// sender's history. Not in a history, so not counted: queries, heartbeats, rejected updates,
// extra workflow task heartbeats of a long local activity, exports, and a schedule's own two
// actions per firing (ScheduleActions). A memo update (WorkflowPropertiesModified) is not an
// action: counted apart, in MemoUpdates.
package actioncount

import (
	"encoding/json"
	"reflect"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// ListPriceUSDPerMillion is Temporal Cloud's list price of one million actions, before volume
// discounts.
const ListPriceUSDPerMillion = 50.0

// ScheduleActions is what Temporal Cloud bills a schedule for one firing besides the start of
// the workflow it runs (which that workflow's history counts).
const ScheduleActions = 2

// Cost is what one workflow run (or a sum of runs) cost Temporal, counted from history.
type Cost struct {
	// Runs is the workflow runs counted; Events their history events.
	Runs, Events int
	// Actions is the billable actions, the sum of the counts below except MemoUpdates and
	// LocalActivities (whose markers are billed per workflow task, LocalActivityTasks).
	Actions int
	Starts  int
	// Activities counts activity attempts, retries included; Retries only the retries.
	Activities, Retries int
	Timers              int
	Upserts             int
	Signals             int
	// LocalActivityTasks is the workflow tasks that recorded local-activity markers;
	// LocalActivities the markers; LocalAttempts the attempts they record (a local activity
	// retries inside the worker, one marker in all).
	LocalActivityTasks, LocalActivities, LocalAttempts int
	SideEffects                                        int
	ChildStarts                                        int
	Updates                                            int
	Nexus                                              int
	// MemoUpdates counts WorkflowPropertiesModified events: not billed (see the package doc).
	MemoUpdates int
	// WorkflowTaskTimeouts counts workflow tasks that timed out (lost in delivery, or a
	// worker gone): not billed, but like Retries a sign the run did not take the happy path.
	WorkflowTaskTimeouts int
	// ActivitiesByType counts activity attempts per activity type; UpsertsBySearchAttribute
	// counts the upserts that set each search attribute.
	ActivitiesByType         map[string]int
	UpsertsBySearchAttribute map[string]int
}

// Add sums o into c, every count field by reflection, so that a count added to Cost is summed
// too.
func (c *Cost) Add(o Cost) {
	cv, ov := reflect.ValueOf(c).Elem(), reflect.ValueOf(o)
	for i := range cv.NumField() {
		if f := cv.Field(i); f.Kind() == reflect.Int {
			f.SetInt(f.Int() + ov.Field(i).Int())
		}
	}
	c.ActivitiesByType = addCounts(c.ActivitiesByType, o.ActivitiesByType)
	c.UpsertsBySearchAttribute = addCounts(c.UpsertsBySearchAttribute, o.UpsertsBySearchAttribute)
}

// addCounts adds from into into, which it makes on first use.
func addCounts(into, from map[string]int) map[string]int {
	for k, v := range from {
		if into == nil {
			into = map[string]int{}
		}
		into[k] += v
	}
	return into
}

// USDPerMillion is what n actions cost per million units of work (generations merged,
// stores...) at list price, when they bought `per` of them: the figure to compare designs by.
func USDPerMillion(actions float64, per float64) float64 {
	if per <= 0 {
		return 0
	}
	return actions / per * ListPriceUSDPerMillion
}

// Marker names the Go SDK records (internal constants of go.temporal.io/sdk); its others are
// SideEffect and MutableSideEffect, one action each.
const (
	markerLocalActivity = "LocalActivity"
	markerVersion       = "Version"
)

// changeVersionAttribute is the search attribute GetVersion upserts, exempt from billing.
const changeVersionAttribute = "TemporalChangeVersion"

// Events counts one run's history (all of its events, in order). Pure.
func Events(events []*historypb.HistoryEvent) Cost {
	c := Cost{Runs: 1, Events: len(events)}
	laTasks := map[int64]bool{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.Starts++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.Activities++
			c.ActivitiesByType = addCounts(c.ActivitiesByType, map[string]int{ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(): 1})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if extra := int(ev.GetActivityTaskStartedEventAttributes().GetAttempt()) - 1; extra > 0 {
				c.Activities += extra
				c.Retries += extra
				// The type is on the scheduled event; retries are counted in the total only.
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Timers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields[changeVersionAttribute]; ok && len(fields) == 1 {
				continue
			}
			c.Upserts++
			for name := range fields {
				c.UpsertsBySearchAttribute = addCounts(c.UpsertsBySearchAttribute, map[string]int{name: 1})
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			c.Signals++
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			c.ChildStarts++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
			c.Updates++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED,
			enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			c.Nexus++
		case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			c.MemoUpdates++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			c.WorkflowTaskTimeouts++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			m := ev.GetMarkerRecordedEventAttributes()
			switch m.GetMarkerName() {
			case markerVersion:
			case markerLocalActivity:
				c.LocalActivities++
				c.LocalAttempts += localActivityAttempts(m)
				laTasks[m.GetWorkflowTaskCompletedEventId()] = true
			default: // SideEffect, MutableSideEffect, and any marker of another SDK
				c.SideEffects++
			}
		}
	}
	c.LocalActivityTasks = len(laTasks)
	c.Actions = c.Starts + c.Activities + c.Timers + c.Upserts + c.Signals + c.LocalActivityTasks +
		c.SideEffects + c.ChildStarts + c.Updates + c.Nexus
	return c
}

// localActivityAttempts reads the attempt count a LocalActivity marker records (the SDK's
// marker data: {"ActivityType":...,"Attempt":n,...}); 1 if it cannot be read.
func localActivityAttempts(m *historypb.MarkerRecordedEventAttributes) int {
	for _, p := range m.GetDetails()["data"].GetPayloads() {
		var d struct{ Attempt int }
		if json.Unmarshal(p.GetData(), &d) == nil && d.Attempt > 0 {
			return d.Attempt
		}
	}
	return 1
}
