package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// list lists the target's shards with pending generations. ListPendingShards runs as a
// local activity, inside the workflow task that needs it, on the worker that runs that task:
// a listing costs no activity dispatch, no second workflow task to read its result and no
// schedule/start/complete events, only one LocalActivity marker recorded with the commands
// that follow it (still one billable action). The listing is one watch in the tracker, so
// the status query shows it in flight; a failure is the activity's error (an
// *ActivityError around the ApplicationError).
//
// REQUIRES: every worker that runs MergeWal tasks has ListPendingShards registered (the
// shared-queue worker registers every activity: worker.TemporalWorkers).
func (r *mergeRun) list(ctx workflow.Context) (contract.ListPendingShardsResult, error) {
	var listed contract.ListPendingShardsResult
	params := contract.ListPendingShardsParams{Target: r.target.String()}
	w := r.tr.newWatch(contract.ListPendingShardsActivity, "", contract.TaskQueue)
	err := r.tr.execLocal(ctx, localListOptions(), w, params, &listed)
	return listed, err
}
