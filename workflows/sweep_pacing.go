package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Start batches of a sweep launch on a planned cadence: batch n at the sweep's first
// launch + n × StartSpacing, not StartSpacing after the previous batch's launch, so a
// workflow task that runs late under load does not push every later batch back.

// waitTurn blocks until this batch may launch, then counts its launch: at the first
// launch + launched × StartSpacing. A batch whose time passed while it waited for a
// Concurrency slot or for a late workflow task launches at once, so the batches that fell
// due launch together and the sweep keeps its cadence, at most
// StartBatch starts per StartSpacing on average from the first launch and never more than
// Concurrency batches in flight (the caller holds a slot of st.sem). The wait is a
// workflow timer, so replays wait alike; a batch that is due has none.
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
