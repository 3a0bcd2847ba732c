package contract

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
)

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
	if runTimeout <= 0 {
		runTimeout = DefaultMergeRunTimeout
	}
	return runTimeout / 2
}
