package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// runHandOverDue says that this run has used half its run timeout (or, started without
// one, half contract.DefaultMergeRunTimeout): MergeWal continues as new after the pass that
// just committed, CompactBase starts no further pass, so the pass in flight finishes well
// before Temporal ends the run (contract.RunContinueAfter). Deterministic: the run's start
// time and timeout come from its first event, the age from workflow time.
// A Reset run keeps its first event, so its age counts from the original start while the
// server counts its run timeout from the reset: past half-way it hands over after its first
// pass, early but never late.
func runHandOverDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return workflow.Now(ctx).Sub(info.WorkflowStartTime) >= contract.RunContinueAfter(info.WorkflowRunTimeout)
}
