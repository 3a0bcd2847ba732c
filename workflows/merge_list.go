package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// list lists the target's shards with pending generations, as a local activity inside the
// workflow task that needs it (no dispatch, no second task, one marker), watched by the
// tracker so the status query shows it.
//
// REQUIRES: every worker that runs MergeWal tasks has ListPendingShards registered
// (worker.TemporalWorkers).
func (r *mergeRun) list(ctx workflow.Context) (contract.ListPendingShardsResult, error) {
	var listed contract.ListPendingShardsResult
	params := contract.ListPendingShardsParams{Target: r.target.String()}
	w := r.tr.newWatch(contract.ListPendingShardsActivity, "", contract.TaskQueue)
	err := r.tr.execLocal(ctx, localListOptions(), w, params, &listed)
	return listed, err
}
