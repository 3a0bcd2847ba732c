package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// prioritized is o at the merge's task-queue priority from the input, which the whole chain
// carries, so a run started without it (Temporal CLI or Web) still has fair activities and
// the weight replays.
func (r *mergeRun) prioritized(o workflow.ActivityOptions) workflow.ActivityOptions {
	o.Priority = contract.MergePriority(r.target.Kind, r.in.Urgent, r.in.FairnessWeight)
	return o
}
