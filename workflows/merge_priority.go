package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// prioritized is o at the merge's task-queue priority (contract.MergePriority from the
// input, which the whole continue-as-new chain carries): the run's start set the same on its
// workflow tasks, but a run started without it (Temporal CLI or Web) would otherwise leave
// its activities unfair and routine, and a weight read from anything but the input would not
// replay.
func (r *mergeRun) prioritized(o workflow.ActivityOptions) workflow.ActivityOptions {
	o.Priority = contract.MergePriority(r.target.Kind, r.in.Urgent, r.in.FairnessWeight)
	return o
}
