package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// scheduledByAttribute is the search attribute the server sets on a workflow a schedule
// started: such a start is billed ScheduleActions more than its history shows.
const scheduledByAttribute = "TemporalScheduledById"

// temporalBill is what a scenario's workflows cost in Temporal Cloud actions, counted from
// their histories (internal/actioncount), by workflow type.
type temporalBill struct {
	byType map[string]*actioncount.Cost
	// scheduled counts the runs a schedule started (ScheduleActions each, not in history).
	scheduled int
	// reclaimed sums the generations the MergeWal runs' round commits reclaimed (open runs
	// and continued-as-new ones included); openMerges counts the runs still open.
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

// countTemporalBill reads every run visibility lists for query (all of them, page by page)
// and counts its history.
func countTemporalBill(ctx context.Context, c client.Client, query string) (*temporalBill, error) {
	b := &temporalBill{byType: map[string]*actioncount.Cost{}}
	err := listWorkflows(ctx, c, query, func(e *workflowpb.WorkflowExecutionInfo) error {
		id, runID, typ := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetType().GetName()
		events, err := actioncount.History(ctx, c, id, runID)
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

// listWorkflows calls f on every run visibility lists for query, page by page, until f
// fails.
func listWorkflows(ctx context.Context, c client.Client, query string, f func(*workflowpb.WorkflowExecutionInfo) error) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
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

// table renders the bill: one row per workflow type, the total, and per generation reclaimed
// with dollars per million generations at Temporal Cloud's list price.
func (b *temporalBill) table(title string) Table {
	t := Table{Title: title, Header: []string{"workflow", "runs", "actions", "activities", "local-activity tasks", "upserts", "timers", "signals"}}
	for _, typ := range slices.Sorted(maps.Keys(b.byType)) {
		c := b.byType[typ]
		t.Rows = append(t.Rows, []string{typ, fmt.Sprint(c.Runs), fmt.Sprint(c.Actions), fmt.Sprint(c.Activities),
			fmt.Sprint(c.LocalActivityTasks), fmt.Sprint(c.Upserts), fmt.Sprint(c.Timers), fmt.Sprint(c.Signals)})
	}
	if b.scheduled > 0 {
		t.Rows = append(t.Rows, []string{"schedule firings (not in history)", fmt.Sprint(b.scheduled),
			fmt.Sprint(b.scheduled * actioncount.ScheduleActions), "", "", "", "", ""})
	}
	tot := b.total()
	t.Rows = append(t.Rows, []string{"**total**", fmt.Sprint(tot.Runs), fmt.Sprint(tot.Actions), fmt.Sprint(tot.Activities),
		fmt.Sprint(tot.LocalActivityTasks), fmt.Sprint(tot.Upserts), fmt.Sprint(tot.Timers), fmt.Sprint(tot.Signals)})
	if b.reclaimed > 0 {
		t.Rows = append(t.Rows, []string{fmt.Sprintf("per generation reclaimed (%d)", b.reclaimed), "", fmt.Sprintf("%.3f", b.perGeneration()),
			fmt.Sprintf("$%.2f per million generations at list price ($%.0f per million actions)",
				actioncount.USDPerMillion(float64(tot.Actions), float64(b.reclaimed)), actioncount.ListPriceUSDPerMillion), "", "", "", ""})
	}
	return t
}
