package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Start batches of a sweep launch on a planned cadence, batch n at the first launch + n ×
// StartSpacing, so a workflow task that runs late does not push every later batch back.

// waitTurn blocks on a workflow timer until this batch may launch, then counts its launch; a
// batch already due launches at once, so the sweep keeps its cadence.
//
// REQUIRES: the caller holds one of st.sem's Concurrency slots.
func (st *sweepStarts) waitTurn(ctx workflow.Context) error {
	if st.pace == nil {
		return nil
	}
	if err := st.pace.Acquire(ctx, 1); err != nil {
		return err
	}
	defer st.pace.Release(1)
	if st.launched == 0 {
		st.firstLaunch = workflow.Now(ctx)
	} else {
		due := st.firstLaunch.Add(time.Duration(st.launched) * st.in.StartSpacing)
		if wait := due.Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	st.launched++
	return nil
}
