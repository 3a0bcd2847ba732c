package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// sweepPlannedPacingChange versions the launch cadence of the paged demand sweep's start
// batches: batch n launches at the sweep's first launch + n × StartSpacing (its planned
// time) instead of StartSpacing after the previous batch's launch. Under load the workflow
// task that follows each spacing timer ran ~1.2 s late, and with the old cadence every such
// delay pushed all later batches back: 40 batches launched 2.2 s apart instead of 1 s
// (docs/benchmarks/fleet.md). Runs recorded before it replay the old cadence.
const (
	sweepPlannedPacingChange  = "sweep-planned-pacing"
	sweepPlannedPacingVersion = workflow.Version(1)
)

// plannedPacing says whether this paged sweep paces its batches from their planned launch
// times: the run carries sweepPlannedPacingChange and the input did not ask for the old
// cadence. The version is asked on every paged sweep, so a run's marker does not depend on
// its input.
func plannedPacing(ctx workflow.Context, in contract.MaintenanceSweepInput) bool {
	v := workflow.GetVersion(ctx, sweepPlannedPacingChange, workflow.DefaultVersion, sweepPlannedPacingVersion)
	return v >= sweepPlannedPacingVersion && in.StartPacing != contract.StartPacingAfterLaunch
}

// waitTurn blocks until this batch may launch, then counts its launch. Unplanned: at least
// StartSpacing after the previous launch, so one late workflow task delays every later
// batch. Planned: at the first launch + launched × StartSpacing; a batch whose time passed
// while it waited for a Concurrency slot or for a late workflow task launches at once, so
// the batches that fell due launch together and the sweep keeps its cadence, at most
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
		due := st.lastLaunch.Add(st.in.StartSpacing)
		if st.planned {
			due = st.firstLaunch.Add(time.Duration(st.launched) * st.in.StartSpacing)
		}
		if wait := due.Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	st.launched++
	st.lastLaunch = workflow.Now(ctx)
	return nil
}
