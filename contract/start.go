package contract

import (
	"cmp"
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/target"
)

// StartMergeWal starts t's MergeWal, or attaches to the one running (USE_EXISTING, then
// ALLOW_DUPLICATE, ErrorWhenAlreadyStarted so a refused start is an error, not a stale
// handle). in.Trigger becomes WalTrigger and the memo's trigger, with in.TriggerReason the
// summary; the run times out after DefaultMergeRunTimeout unless RunTimeout says otherwise,
// and takes MergePriority. An input out of bounds is refused before anything starts.
func StartMergeWal(ctx context.Context, c client.Client, t target.Target, in MergeWalInput, with ...StartOption) (client.WorkflowRun, error) {
	in.Target = t.String()
	in.Trigger = TriggerOrUnknown(in.Trigger)
	opts := startOptions(MergeWalID(t), t, in.Trigger, in.TriggerReason)
	opts.Priority = MergePriority(t.Kind, in.Urgent, in.FairnessWeight)
	opts.StaticSummary = fmt.Sprintf("Merge WAL of %s — triggered by %s", t, TriggerWords(in.Trigger, in.TriggerReason))
	opts.StaticDetails = "Folds every shard's flushed generations into the base table, oldest first, one commit at a time.\n\n" +
		"Triggered by **" + TriggerWords(in.Trigger, in.TriggerReason) + "**. The current details show the live phase and, " +
		"once finished, the shards, generations reclaimed, bytes and passes."
	return execute(ctx, c, opts, with, MergeWalWorkflow, in)
}

// StartCompactBase starts t's CompactBase or attaches to the running one; see
// StartMergeWal for the ID policies and the trigger. in.Target is set from t.
func StartCompactBase(ctx context.Context, c client.Client, t target.Target, in CompactBaseInput, with ...StartOption) (client.WorkflowRun, error) {
	in.Target = t.String()
	in.Trigger = TriggerOrUnknown(in.Trigger)
	opts := startOptions(CompactID(t), t, in.Trigger, in.TriggerReason)
	opts.StaticSummary = fmt.Sprintf("Compact base of %s — triggered by %s", t, TriggerWords(in.Trigger, in.TriggerReason))
	opts.StaticDetails = "Rewrites the base table's runs into fewer runs, a bounded amount of work per pass."
	return execute(ctx, c, opts, with, CompactBaseWorkflow, in)
}

// execute refuses in out of bounds (Validate), applies with to opts and starts workflow
// with in; a running workflow of another type under the ID is an ErrWorkflowIDTaken.
func execute(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, with []StartOption, workflow string, in interface{ Validate() error }) (client.WorkflowRun, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	for _, o := range with {
		o(&opts)
	}
	if err := CheckMergeRunTimeout(opts.WorkflowRunTimeout); err != nil {
		return nil, fmt.Errorf("run timeout: %w", err)
	}
	metRunning := new(bool)
	run, err := c.ExecuteWorkflow(context.WithValue(ctx, metRunningKey{}, metRunning), opts, workflow, in)
	if err != nil {
		return nil, err
	}
	if err := checkAttached(ctx, c, run, workflow, *metRunning); err != nil {
		return nil, err
	}
	return run, nil
}

// StartOption adjusts how StartMergeWal and StartCompactBase start a run; the ID policies,
// task queue and search attributes stay as startOptions sets them.
type StartOption func(*client.StartWorkflowOptions)

// PendingAtStart (n > 0) gives a MergeWal start the pending generations its starter knows, so
// WalPending and WalPendingAtStart come free with the start and `WalPending > N` finds the run
// from its first second; n <= 0 leaves them to the end.
func PendingAtStart(n int) StartOption {
	return func(o *client.StartWorkflowOptions) {
		if n <= 0 {
			return
		}
		o.TypedSearchAttributes = temporal.NewSearchAttributes(o.TypedSearchAttributes.Copy(),
			WalPending.ValueSet(int64(n)), WalPendingAtStart.ValueSet(int64(n)))
	}
}

// startOptions are the start options every trigger of t's workflow id uses, so that they all
// dedupe.
func startOptions(id string, t target.Target, trigger, reason string) client.StartWorkflowOptions {
	trigger = TriggerOrUnknown(trigger)
	memo := map[string]any{MemoTrigger: trigger}
	if reason != "" {
		memo[MemoTriggerReason] = reason
	}
	return client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			WalTarget.ValueSet(t.String()), WalKind.ValueSet(string(t.Kind)), WalTrigger.ValueSet(trigger)),
		Memo:               memo,
		WorkflowRunTimeout: DefaultMergeRunTimeout,
	}
}

// Bounds of a MergeWal or CompactBase run (docs/DESIGN.md §10): every starter sets the run
// timeout, so Temporal ends a run that cannot progress and the next trigger starts afresh.
const (
	// DefaultMergeRunTimeout is twice the run age at which a MergeWal continues as new, so
	// the other half leaves room for the pass then in flight (a 30 min Prepare, a CommitRound
	// and an Abort, with their backoffs).
	DefaultMergeRunTimeout = 2 * time.Hour
	// MinMergeRunTimeout keeps a run long enough for one listing, one pass and its commit.
	MinMergeRunTimeout = 10 * time.Second
	// MaxMergeRunTimeout: a week; a merge held that long is held for ever in practice.
	MaxMergeRunTimeout = 7 * 24 * time.Hour
)

// CheckMergeRunTimeout reports a run timeout outside [MinMergeRunTimeout, MaxMergeRunTimeout].
func CheckMergeRunTimeout(d time.Duration) error {
	if d < MinMergeRunTimeout || d > MaxMergeRunTimeout {
		return fmt.Errorf("%s is outside %s to %s", d, MinMergeRunTimeout, MaxMergeRunTimeout)
	}
	return nil
}

// RunTimeout sets the run's WorkflowRunTimeout to d (DefaultMergeRunTimeout without this
// option). A continued-as-new run inherits it; d must pass CheckMergeRunTimeout.
func RunTimeout(d time.Duration) StartOption {
	return func(o *client.StartWorkflowOptions) { o.WorkflowRunTimeout = d }
}

// RunContinueAfter is the age, half the run timeout, at which a run with runTimeout (0: none)
// hands over, so the pass in flight finishes within it.
func RunContinueAfter(runTimeout time.Duration) time.Duration {
	return cmp.Or(max(runTimeout, 0), DefaultMergeRunTimeout) / 2
}
