package contract

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
)

// Bounds of a MergeWal or CompactBase run (docs/DESIGN.md §10, "A run that cannot make
// progress"). Every walkeeper starter sets the run's WorkflowRunTimeout, so a run whose
// workflow task fails on every attempt, or whose activities never finish, is ended by Temporal
// and the next trigger starts a fresh run instead of attaching to it for ever.
const (
	// DefaultMergeRunTimeout is twice the run age at which a MergeWal continues as new (and a
	// CompactBase stops starting passes): the other half leaves room for the pass then in
	// flight, whose longest legitimate attempt is a Prepare of DefaultPrepareTimeout (30 min)
	// followed by a CommitRound (5 min) and an Abort (2 min), with their backoffs.
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

// RunContinueAfter is the age at which a run with runTimeout (0: started without one, e.g.
// by hand) hands over: MergeWal continues as new, CompactBase starts no further pass. Half the
// run timeout, so the pass in flight finishes within it.
func RunContinueAfter(runTimeout time.Duration) time.Duration {
	if runTimeout <= 0 {
		runTimeout = DefaultMergeRunTimeout
	}
	return runTimeout / 2
}
