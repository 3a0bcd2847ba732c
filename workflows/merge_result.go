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

// shardResults is every shard's result, in shard order: what a continue-as-new carries.
func (r *mergeRun) shardResults() []contract.ShardMergeResult {
	out := make([]contract.ShardMergeResult, 0, len(r.shards))
	for _, sh := range r.shards {
		out = append(out, sh.res)
	}
	return out
}
