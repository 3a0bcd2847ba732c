package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// resultCappedChange is the GetVersion change ID of a MergeWal result that lists at most
// contract.MaxResultShards shards: a run that started before it lists every shard, so its
// result grew about 150 bytes a shard (and up to contract.MaxFailureTextBytes a failed one)
// past what one Temporal payload holds.
const resultCappedChange = "merge-result-capped"

// resultCapped decides once, in the run's first workflow task, whether the run's result is
// capped (decision 0301: a run keeps the path it started on).
func resultCapped(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, resultCappedChange, workflow.DefaultVersion, 1) == 1
}

// carryBoundedChange is the GetVersion change ID of a continue-as-new whose carry cuts each
// shard's failure text to contract.MaxCarryErrorBytes: before it, a carry repeated up to
// contract.MaxFailureTextBytes a failed shard, and about 490 failed shards passed the 2 MiB
// Temporal refuses a continue-as-new's input at.
const carryBoundedChange = "merge-carry-bounded"

// carryBounded decides, when the run continues as new, whether its carry cuts failure texts;
// it is asked only there, so a run that never continues records no marker.
func carryBounded(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, carryBoundedChange, workflow.DefaultVersion, 1) == 1
}

// carry is what this run hands to its successor over continue-as-new: every shard's result,
// with each failure text cut to contract.MaxCarryErrorBytes when bounded.
func (r *mergeRun) carry(bounded bool) *contract.MergeWalCarry {
	shards := r.shardResults()
	if bounded {
		for i := range shards {
			shards[i].Error = contract.Clip(shards[i].Error, contract.MaxCarryErrorBytes-len("…"))
		}
	}
	return &contract.MergeWalCarry{WorkflowRuns: r.workflowRun, Shards: shards, PendingAtStart: r.pendingAtStart,
		Actions: r.actions()}
}

// shardResults is every shard's result, in shard order: what a continue-as-new carries.
func (r *mergeRun) shardResults() []contract.ShardMergeResult {
	out := make([]contract.ShardMergeResult, 0, len(r.shards))
	for _, sh := range r.shards {
		out = append(out, sh.res)
	}
	return out
}
