package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// runHandOverDue says that this run has used half its run timeout (or of
// contract.DefaultMergeRunTimeout), so the pass in flight finishes well before Temporal ends
// the run. Deterministic: start time and timeout come from its first event, the age from
// workflow time (a Reset run so hands over early, never late).
func runHandOverDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return workflow.Now(ctx).Sub(info.WorkflowStartTime) >= contract.RunContinueAfter(info.WorkflowRunTimeout)
}
