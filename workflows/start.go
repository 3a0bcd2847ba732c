package workflows

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/store"
)

// Register registers every walkeeper workflow on r under its explicit name. Any
// worker.Registry (a worker, the test environment) qualifies, and so does a replayer.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(MergeWal, workflow.RegisterOptions{Name: MergeWalWorkflow})
	r.RegisterWorkflowWithOptions(CompactBase, workflow.RegisterOptions{Name: CompactBaseWorkflow})
	r.RegisterWorkflowWithOptions(MaintenanceSweep, workflow.RegisterOptions{Name: MaintenanceSweepWorkflow})
	r.RegisterWorkflowWithOptions(MergeWalTick, workflow.RegisterOptions{Name: MergeWalTickWorkflow})
}

// StartMergeWal starts target's MergeWal, or attaches to the one already running: the
// workflow ID is MergeWalID(target), a running execution is reused (conflict policy
// USE_EXISTING) and a closed one may be followed by a new run (reuse ALLOW_DUPLICATE).
// ErrorWhenAlreadyStarted makes a start the server refuses surface as an error instead of
// a handle to a stale closed run. in.Target is set from target.
func StartMergeWal(ctx context.Context, c client.Client, target store.Target, in MergeWalInput) (client.WorkflowRun, error) {
	in.Target = target.String()
	opts := startOptions(MergeWalID(target), target)
	opts.StaticSummary = fmt.Sprintf("Merge WAL of %s", target)
	opts.StaticDetails = "Folds every shard's flushed generations into the base table, oldest first, one commit at a time."
	return c.ExecuteWorkflow(ctx, opts, MergeWalWorkflow, in)
}

// StartCompactBase starts target's CompactBase or attaches to the running one; see
// StartMergeWal for the ID policies. in.Target is set from target.
func StartCompactBase(ctx context.Context, c client.Client, target store.Target, in CompactBaseInput) (client.WorkflowRun, error) {
	in.Target = target.String()
	opts := startOptions(CompactID(target), target)
	opts.StaticSummary = fmt.Sprintf("Compact base of %s", target)
	opts.StaticDetails = "Rewrites the base table's runs into fewer runs, a bounded amount of work per pass."
	return c.ExecuteWorkflow(ctx, opts, CompactBaseWorkflow, in)
}

func startOptions(id string, target store.Target) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    targetAttributes(target),
	}
}

func targetAttributes(target store.Target) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		WalTarget.ValueSet(target.String()),
		WalKind.ValueSet(string(target.Kind)),
	)
}

// ensureTargetAttributes upserts WalTarget and WalKind when the start did not set them (a
// bare `temporal workflow start`), so every run is findable by target in Temporal Web.
func ensureTargetAttributes(ctx workflow.Context, target store.Target) {
	sa := workflow.GetTypedSearchAttributes(ctx)
	if v, ok := sa.GetKeyword(WalTarget); ok && v == target.String() {
		return
	}
	err := workflow.UpsertTypedSearchAttributes(ctx,
		WalTarget.ValueSet(target.String()),
		WalKind.ValueSet(string(target.Kind)))
	if err != nil {
		workflow.GetLogger(ctx).Warn("Cannot set target search attributes.", "error", err)
	}
}
