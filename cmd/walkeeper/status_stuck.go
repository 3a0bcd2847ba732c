package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/worker"
)

const (
	// stuckMinAge: `walkeeper status` describes only runs at least this old.
	stuckMinAge = time.Minute
	// maxStuckDescribes bounds the describes one `walkeeper status` makes.
	maxStuckDescribes = 100
)

// describedStuck is why the described running run cannot make progress, as the workers'
// stuck-run scan sees it (worker.ClassifyRun), with the last workflow task failure. A run
// without a run timeout is held to contract.DefaultMergeRunTimeout: the CLI does not know
// the workers' --merge-run-timeout.
func describedStuck(ctx context.Context, c client.Client, namespace string, d *workflowservice.DescribeWorkflowExecutionResponse) worker.StuckRun {
	st := worker.ClassifyRun(d, time.Now(), contract.DefaultMergeRunTimeout)
	e := d.GetWorkflowExecutionInfo().GetExecution()
	return st.WithLastWorkflowTaskFailure(ctx, c, namespace, e.GetWorkflowId(), e.GetRunId())
}

// stuckNote describes run id/runID and says why it cannot make progress ("" when it can, or
// when it cannot be described).
func stuckNote(ctx context.Context, c client.Client, namespace, id, runID string) string {
	d, err := c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return ""
	}
	st := describedStuck(ctx, c, namespace, d)
	if st.Reason == "" {
		return ""
	}
	return stuckText(st)
}

// stuckText is the stuck line of a run: its detail and what ends it.
func stuckText(st worker.StuckRun) string {
	switch {
	case st.Terminable():
		return fmt.Sprintf("%s; past the deadline %s without a run timeout: the workers' stuck-run scan terminates it", st.Detail, st.Deadline)
	case st.OwnTimeout:
		return fmt.Sprintf("%s; Temporal ends it at its run timeout %s (in %s)", st.Detail, st.Deadline, max(0, st.Deadline-st.Age).Round(time.Second))
	}
	return fmt.Sprintf("%s; no run timeout: the workers' stuck-run scan terminates it %s after its start", st.Detail, st.Deadline)
}
