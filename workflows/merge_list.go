package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// localListChange versions how MergeWal lists its shards' debt (fewer actions per merge,
// so the same merges cost less orchestration): ListPendingShards runs as a local activity, inside the workflow task that needs it,
// on the worker that runs that task, instead of as an activity task on the shared queue. A
// listing then costs no activity dispatch, no second workflow task to read its result and
// no schedule/start/complete events: one LocalActivity marker, recorded with the commands
// that follow it. A one-generation merge goes from 4 activity dispatches and 5 workflow
// tasks to 2 and 3 (docs/benchmarks/temporal-overhead.md). The listing is still one billable action
// (a local activity marker is one, as an activity is), so a pass costs what it cost.
//
// Runs recorded before it (and runs from before fewerActionsChange, which keep every old
// command) list through the activity.
//
// REQUIRES: every worker that runs MergeWal tasks has ListPendingShards registered (the
// shared-queue worker registers every activity: worker.startTemporalLocked).
const (
	localListChange  = "merge-wal-local-list"
	localListVersion = workflow.Version(1)
)

// list lists the target's shards with pending generations: as a local activity in runs from
// localListChange on, else as an activity on the shared queue. Either way the listing is
// one watch in the tracker, so the status query shows it in flight; a failure is the
// activity's error (an *ActivityError around the ApplicationError) on both paths, so
// listFailure and relist treat them alike.
func (r *mergeRun) list(ctx workflow.Context) (contract.ListPendingShardsResult, error) {
	var listed contract.ListPendingShardsResult
	params := contract.ListPendingShardsParams{Target: r.target.String()}
	w := r.tr.newWatch(contract.ListPendingShardsActivity, "", contract.TaskQueue)
	if r.localList {
		err := r.tr.execLocal(ctx, localListOptions(), w, params, &listed)
		return listed, err
	}
	err := r.tr.exec(ctx, listOptions(), w, params, &listed)
	return listed, err
}
