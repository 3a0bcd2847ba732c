package contract

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/target"
)

// StartMergeWal starts t's MergeWal, or attaches to the one already running: the workflow
// ID is MergeWalID(t), a running execution is reused (conflict policy USE_EXISTING) and a
// closed one may be followed by a new run (reuse ALLOW_DUPLICATE). ErrorWhenAlreadyStarted
// makes a start the server refuses surface as an error instead of a handle to a stale closed
// run. in.Target is set from t.
func StartMergeWal(ctx context.Context, c client.Client, t target.Target, in MergeWalInput) (client.WorkflowRun, error) {
	in.Target = t.String()
	opts := startOptions(MergeWalID(t), t)
	opts.StaticSummary = fmt.Sprintf("Merge WAL of %s", t)
	opts.StaticDetails = "Folds every shard's flushed generations into the base table, oldest first, one commit at a time."
	return c.ExecuteWorkflow(ctx, opts, MergeWalWorkflow, in)
}

// StartCompactBase starts t's CompactBase or attaches to the running one; see
// StartMergeWal for the ID policies. in.Target is set from t.
func StartCompactBase(ctx context.Context, c client.Client, t target.Target, in CompactBaseInput) (client.WorkflowRun, error) {
	in.Target = t.String()
	opts := startOptions(CompactID(t), t)
	opts.StaticSummary = fmt.Sprintf("Compact base of %s", t)
	opts.StaticDetails = "Rewrites the base table's runs into fewer runs, a bounded amount of work per pass."
	return c.ExecuteWorkflow(ctx, opts, CompactBaseWorkflow, in)
}

// startOptions are the start options every trigger of t's workflow id uses: the shared
// task queue, the deduplicating ID policies and t's search attributes.
func startOptions(id string, t target.Target) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    targetAttributes(t),
	}
}
