package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/worker"
)

const (
	// stuckMinAge: `walkeeper status` describes only runs at least this old.
	stuckMinAge = time.Minute
	// maxStuckDescribes bounds the describes one `walkeeper status` makes.
	maxStuckDescribes = 100
)

// stuckView tells why running runs cannot make progress, as the workers' stuck-run scan sees
// it (worker.DiagnoseRun). c is nil when Temporal is unreachable; deadline is the workers'
// --merge-run-timeout, which a run without a run timeout of its own is held to.
type stuckView struct {
	c         client.Client
	namespace string
	deadline  time.Duration
}

// described says why a described running run cannot make progress, as the workers' scan
// diagnoses it ("" when it can).
func (sv stuckView) described(ctx context.Context, d *workflowservice.DescribeWorkflowExecutionResponse) string {
	return stuckText(worker.DiagnoseRun(ctx, sv.c, sv.namespace, d, time.Now(), sv.deadline))
}

// stuckText is the stuck line of a run: its detail and what ends it; "" when it is not stuck.
func stuckText(st worker.StuckRun) string {
	switch {
	case st.Reason == "":
		return ""
	case st.Terminable():
		return fmt.Sprintf("%s; past the deadline %s without a run timeout: the workers' stuck-run scan terminates it", st.Detail, st.Deadline)
	case st.OwnTimeout:
		return fmt.Sprintf("%s; Temporal ends it at its run timeout %s (in %s)", st.Detail, st.Deadline, max(0, st.Deadline-st.Age).Round(time.Second))
	}
	return fmt.Sprintf("%s; no run timeout: the workers' stuck-run scan terminates it %s after its start", st.Detail, st.Deadline)
}
