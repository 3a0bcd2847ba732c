package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/store"
)

// watchSweep polls the sweep until it closes, discovery fails an attempt or the budget runs out: why
// it failed ("" = it closed), and the largest discovery heartbeat.
func watchSweep(ctx context.Context, c client.Client, id, runID string, budget time.Duration) (failed string, heartbeat int) {
	deadline := time.Now().Add(budget)
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, runID)
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
	// events counts the history's events; largest is the largest one (proto bytes: the
	// largest activity input/result/failure, workflow input/result).
	events, largest int
	// pages and batches count the closed discovery and StartWorkflows activities; batchTime is the
	// latter's mean start-to-close, startSpan their first start to last close, launchGap the mean gap
	// between launches.
	pages, batches int
	batchTime      time.Duration
	startSpan      time.Duration
	launchGap      time.Duration
	// actions is the sweep run's billable Temporal actions (internal/actioncount).
	actions int
	// lastDiscovery is when the last discovery activity closed.
	lastDiscovery time.Time
	// discoveryEnd is the last discovery close or the first StartWorkflows start, whichever came first.
	discoveryEnd time.Time
}

// historyOf reads a workflow run's history: its events, the size of the largest, and when
// discovery ended.
func historyOf(ctx context.Context, c client.Client, id, runID string) (sweepHistory, error) {
	var h sweepHistory
	types := map[int64]string{}
	var firstStart, lastStartEnd, firstLaunch, lastLaunch time.Time
	launches := 0
	started := map[int64]time.Time{} // StartWorkflows: scheduled event ID -> started
	var batchTotal time.Duration
	events, err := actioncount.History(ctx, c, id, runID)
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
		var sched int64
		switch {
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			sched = ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			sched = ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			sched = ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
		}
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
				// A sweep that has not begun cannot start a store.
				from := at
				if since.After(from) {
					from = since
				}
				worst = max(worst, st.Sub(from))
			}
		}
		if n == len(planted) || time.Now().After(deadline) {
			return n, worst, nil
		}
		time.Sleep(time.Second)
	}
}

// terminateMerges ends the MergeWal runs this fleet's sweep started, so the next fleet's
// sweep is measured alone.
func terminateMerges(ctx context.Context, c client.Client, since time.Time, prefix string) {
	// Up to 32 at once: one at a time, terminating the 10,000 merges of a 1M-store fleet took
	// longer than starting them.
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
