package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
)

// scheduledByAttribute marks a schedule's start, billed ScheduleActions beyond its history.
const scheduledByAttribute = "TemporalScheduledById"

// temporalBill is the Temporal Cloud actions of a scenario's workflows, by workflow type.
type temporalBill struct {
	byType map[string]*actioncount.Cost
	// scheduled counts the runs a schedule started (ScheduleActions each, not in history).
	scheduled int
	// reclaimed sums the generations MergeWal round commits reclaimed; openMerges counts open runs.
	reclaimed, openMerges int
}

func (b *temporalBill) total() actioncount.Cost {
	var t actioncount.Cost
	for _, c := range b.byType {
		t.Add(*c)
	}
	t.Actions += b.scheduled * actioncount.ScheduleActions
	return t
}

// perGeneration is the actions per generation reclaimed (0 when nothing was).
func (b *temporalBill) perGeneration() float64 {
	if b == nil || b.reclaimed == 0 {
		return 0
	}
	return float64(b.total().Actions) / float64(b.reclaimed)
}

// countTemporalBill counts the history of every run visibility lists for query.
func countTemporalBill(ctx context.Context, c client.Client, query string) (*temporalBill, error) {
	b := &temporalBill{byType: map[string]*actioncount.Cost{}}
	err := listWorkflows(ctx, c, query, func(e *workflowpb.WorkflowExecutionInfo) error {
		id, runID, typ := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetType().GetName()
		events, err := historyEvents(ctx, c, id, runID)
		if err != nil {
			return fmt.Errorf("history of %s/%s: %w", id, runID, err)
		}
		if b.byType[typ] == nil {
			b.byType[typ] = &actioncount.Cost{}
		}
		b.byType[typ].Add(actioncount.Events(events))
		if _, ok := e.GetSearchAttributes().GetIndexedFields()[scheduledByAttribute]; ok {
			b.scheduled++
		}
		if typ == contract.MergeWalWorkflow {
			b.reclaimed += committedGenerations(events)
			if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				b.openMerges++
			}
		}
		return nil
	})
	return b, err
}

// listWorkflows calls f on every run visibility lists for query, until f fails.
func listWorkflows(ctx context.Context, c client.Client, query string, f func(*workflowpb.WorkflowExecutionInfo) error) error {
	var token []byte
	for {
		resp, err := retried(ctx, func(ctx context.Context) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			return c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		})
		if err != nil {
			return fmt.Errorf("list workflows (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if err := f(e); err != nil {
				return err
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// retried is f's answer, asked again after an answer a loaded dev server gave too late.
func retried[T any](ctx context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	var v T
	err := testtemporal.RetryTimedOut(ctx, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	})
	return v, err
}

// historyEvents is workflow id's run's history.
func historyEvents(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	return retried(ctx, func(ctx context.Context) ([]*historypb.HistoryEvent, error) {
		return actioncount.History(ctx, c, id, runID)
	})
}

// committedGenerations sums the generations a MergeWal run's completed CommitRound
// activities reclaimed: what the run merged, whether or not it has finished. Pure.
func committedGenerations(events []*historypb.HistoryEvent) int {
	commits := map[int64]bool{}
	n := 0
	for _, ev := range events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == contract.CommitRoundActivity {
			commits[ev.GetEventId()] = true
		}
		a := ev.GetActivityTaskCompletedEventAttributes()
		if a == nil || !commits[a.GetScheduledEventId()] {
			continue
		}
		var res contract.CommitRoundResult
		if converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &res) == nil {
			for _, sh := range res.Shards {
				n += sh.Reclaimed
			}
		}
	}
	return n
}

// table renders the bill by workflow type, its total, and per generation reclaimed.
func (b *temporalBill) table(title string) Table {
	t := Table{Title: title, Header: []string{"workflow", "runs", "actions", "activities", "local-activity tasks", "upserts", "timers", "signals"}}
	costRow := func(name string, c actioncount.Cost) []string {
		return []string{name, fmt.Sprint(c.Runs), fmt.Sprint(c.Actions), fmt.Sprint(c.Activities),
			fmt.Sprint(c.LocalActivityTasks), fmt.Sprint(c.Upserts), fmt.Sprint(c.Timers), fmt.Sprint(c.Signals)}
	}
	for _, typ := range slices.Sorted(maps.Keys(b.byType)) {
		t.Rows = append(t.Rows, costRow(typ, *b.byType[typ]))
	}
	if b.scheduled > 0 {
		t.Rows = append(t.Rows, []string{"schedule firings (not in history)", fmt.Sprint(b.scheduled),
			fmt.Sprint(b.scheduled * actioncount.ScheduleActions), "", "", "", "", ""})
	}
	tot := b.total()
	t.Rows = append(t.Rows, costRow("**total**", tot))
	if b.reclaimed > 0 {
		t.Rows = append(t.Rows, []string{fmt.Sprintf("per generation reclaimed (%d)", b.reclaimed), "", fmt.Sprintf("%.3f", b.perGeneration()),
			fmt.Sprintf("$%.2f per million generations at list price ($%.0f per million actions)",
				actioncount.USDPerMillion(float64(tot.Actions), float64(b.reclaimed)), actioncount.ListPriceUSDPerMillion), "", "", "", ""})
	}
	return t
}

// mergeWaits is where one MergeWal run's time went, from its history: its tasks' queue waits and
// its first event to its last.
type mergeWaits struct {
	run time.Duration // the first event to the last
	// firstTask is the first workflow task's queue wait; 0 when the start handed it over (eager).
	firstTask time.Duration
	// laterTasks sums the other workflow tasks' waits (sticky queue, or shared after a timeout).
	laterTasks time.Duration
	activities time.Duration // the activities' waits on the shard queues, summed
}

// waitsOf reads the waits of workflow id's latest run from its history.
func waitsOf(ctx context.Context, c client.Client, id string) (mergeWaits, error) {
	var w mergeWaits
	scheduled := map[int64]time.Time{}
	tasks := 0
	events, err := historyEvents(ctx, c, id, "")
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

// watchSweep polls the sweep until it closes, discovery fails an attempt or the budget runs out:
// why it failed ("" = it closed), and the largest discovery heartbeat.
func watchSweep(ctx context.Context, c client.Client, id, runID string, budget time.Duration) (failed string, heartbeat int) {
	deadline := time.Now().Add(budget)
	for {
		d, err := retried(ctx, func(ctx context.Context) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			return c.DescribeWorkflowExecution(ctx, id, runID)
		})
		if err != nil {
			return "describe: " + firstLine(err.Error()), heartbeat
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return "", heartbeat
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetActivityType().GetName() != contract.ScanDemandActivity {
				continue
			}
			heartbeat = max(heartbeat, proto.Size(pa.GetHeartbeatDetails()))
			if pa.GetAttempt() > 1 && pa.GetLastFailure() != nil {
				return fmt.Sprintf("failed: %s attempt %d: %s", pa.GetActivityType().GetName(), pa.GetAttempt()-1, firstLine(pa.GetLastFailure().GetMessage())), heartbeat
			}
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("failed: not finished within %s", budget), heartbeat
		}
		select {
		case <-ctx.Done():
			return ctx.Err().Error(), heartbeat
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sweepHistory is what a sweep's history shows.
type sweepHistory struct {
	// events counts the history's events; largest is the largest one's proto size.
	events, largest int
	// pages and batches count the closed discovery and StartWorkflows activities; batchTime is the
	// latter's mean start-to-close, startSpan their first start to last close, launchGap the mean gap
	// between launches.
	pages, batches int
	batchTime      time.Duration
	startSpan      time.Duration
	launchGap      time.Duration
	actions        int       // the sweep run's billable Temporal actions (internal/actioncount)
	lastDiscovery  time.Time // when the last discovery activity closed
	// discoveryEnd is the last discovery close or the first StartWorkflows start, whichever came
	// first.
	discoveryEnd time.Time
}

// historyOf reads a sweep run's history: its events, the largest, and when discovery ended.
func historyOf(ctx context.Context, c client.Client, id, runID string) (sweepHistory, error) {
	var h sweepHistory
	types := map[int64]string{}
	var firstStart, lastStartEnd, firstLaunch, lastLaunch time.Time
	launches := 0
	started := map[int64]time.Time{} // StartWorkflows: scheduled event ID -> started
	var batchTotal time.Duration
	events, err := historyEvents(ctx, c, id, runID)
	if err != nil {
		return h, err
	}
	h.events = len(events)
	for _, ev := range events {
		h.largest = max(h.largest, proto.Size(ev))
		at := ev.GetEventTime().AsTime()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == contract.StartWorkflowsActivity {
				if launches == 0 {
					firstLaunch = at
				}
				lastLaunch = at
				launches++
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && types[a.GetScheduledEventId()] == contract.StartWorkflowsActivity {
			started[a.GetScheduledEventId()] = at
			if firstStart.IsZero() {
				firstStart = at
			}
		}
		// An activity's close, whichever way it closed (the getters of the others return 0).
		sched := max(ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(),
			ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId(),
			ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId())
		if sched != 0 && types[sched] == contract.ScanDemandActivity {
			h.lastDiscovery = at
			h.pages++
		}
		if sched != 0 && types[sched] == contract.StartWorkflowsActivity {
			h.batches++
			batchTotal += at.Sub(started[sched])
			lastStartEnd = at
		}
	}
	h.actions = actioncount.Events(events).Actions
	if h.batches > 0 {
		h.batchTime = batchTotal / time.Duration(h.batches)
		h.startSpan = lastStartEnd.Sub(firstStart)
	}
	if launches > 1 {
		h.launchGap = lastLaunch.Sub(firstLaunch) / time.Duration(launches-1)
	}
	h.discoveryEnd = h.lastDiscovery
	if !firstStart.IsZero() && (h.discoveryEnd.IsZero() || firstStart.Before(h.discoveryEnd)) {
		h.discoveryEnd = firstStart
	}
	return h, nil
}

// timeToMerge waits up to wait for every planted store's MergeWal start to be visible, and returns
// how many were and the longest time from planting (or the sweep's start, if later) to start.
func timeToMerge(ctx context.Context, c client.Client, since time.Time, planted map[store.Target]time.Time, wait time.Duration) (int, time.Duration, error) {
	deadline := time.Now().Add(wait)
	for {
		starts := map[string]time.Time{}
		err := listWorkflows(ctx, c, fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", contract.MergeWalWorkflow, since.UTC().Format(time.RFC3339Nano)),
			func(e *workflowpb.WorkflowExecutionInfo) error {
				starts[e.GetExecution().GetWorkflowId()] = e.GetStartTime().AsTime()
				return nil
			})
		if err != nil {
			return 0, 0, err
		}
		n, worst := 0, time.Duration(0)
		for t, at := range planted {
			if st, ok := starts[contract.MergeWalID(t)]; ok {
				n++
				// From the later of planting and the sweep's start: a sweep that has not begun cannot
				// start a store.
				worst = max(worst, min(st.Sub(at), st.Sub(since)))
			}
		}
		if n == len(planted) || time.Now().After(deadline) {
			return n, worst, nil
		}
		time.Sleep(time.Second)
	}
}

// terminateMerges ends the MergeWal runs of this fleet, so the next sweep is measured alone.
func terminateMerges(ctx context.Context, c client.Client, since time.Time, prefix string) {
	// 32 at once: one at a time took longer than the 10,000 starts of a 1M-store fleet.
	var g errgroup.Group
	g.SetLimit(32)
	_ = listWorkflows(ctx, c, fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND StartTime >= '%s'", contract.MergeWalWorkflow, since.UTC().Format(time.RFC3339Nano)),
		func(e *workflowpb.WorkflowExecutionInfo) error {
			if id := e.GetExecution().GetWorkflowId(); strings.Contains(id, "/"+prefix) {
				g.Go(func() error {
					_ = c.TerminateWorkflow(context.WithoutCancel(ctx), id, e.GetExecution().GetRunId(), "fleet bench: next fleet")
					return nil
				})
			}
			return nil
		})
	_ = g.Wait()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
