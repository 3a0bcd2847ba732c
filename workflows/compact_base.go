package workflows

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// compactMaxIdlePasses: passes in a row that commit nothing (lost the race to merges
// changing the runs, or nothing to rewrite) before giving up.
const compactMaxIdlePasses = 3

// CompactBase rewrites target's base runs into fewer runs, one bounded pass at a time on
// the shared queue, until at most TargetRuns remain, MaxPasses ran, compactMaxIdlePasses in a
// row committed nothing, or the run is half its run timeout old.
func CompactBase(ctx workflow.Context, in contract.CompactBaseInput) (contract.CompactBaseResult, error) {
	tgt, err := checkTargetInput(ctx, in, "", in.Target, contract.CompactID)
	if err != nil {
		return contract.CompactBaseResult{}, err
	}
	in = in.WithDefaults()
	logger := log.With(workflow.GetLogger(ctx), "target", tgt.String())
	res := contract.CompactBaseResult{Target: tgt.String(), RunsLeft: -1}
	st := contract.CompactBaseStatus{Target: tgt.String(), Phase: contract.PhaseStarting, RunsLeft: -1}
	var tr *tracker
	refresh := func() {
		st.Blocked = tr.blocked("")
		line := fmt.Sprintf("**%s** %s · pass %d", st.Target, st.Phase, st.Pass)
		if st.RunsLeft >= 0 {
			line += fmt.Sprintf(" · %d runs left", st.RunsLeft)
		}
		if st.Blocked != "" {
			line += "\n\n**blocked:** " + st.Blocked
		}
		setDetails(ctx, line)
	}
	tr = newTracker(ctx, contract.DefaultSlotWaitThreshold, refresh)
	if err := workflow.SetQueryHandler(ctx, contract.StatusQuery, func() (contract.CompactBaseStatus, error) {
		out := st
		out.Blocked = tr.blocked("")
		out.InFlight, out.SlotWait, out.RefusedSignals = tr.inFlight(), tr.slotWait, tr.refused
		out.IgnoredFields = ignoredFields(ctx)
		return out, nil
	}); err != nil {
		return res, err
	}
	ensureTargetAttributes(ctx, tgt, in.Trigger)

	st.Phase = contract.PhaseCompacting
	idle := 0
	for res.Passes < in.MaxPasses {
		if res.Passes > 0 && runHandOverDue(ctx) {
			// The next trigger goes on from what is committed, in a run with a fresh timeout.
			logger.Info("Compaction stops half-way through its run timeout.", "passes", res.Passes)
			break
		}
		st.Pass = res.Passes + 1
		refresh()
		var pass contract.CompactPassResult
		w := tr.newWatch(contract.CompactBaseActivity, "", contract.TaskQueue)
		params := contract.CompactPassParams{
			Target:      tgt.String(),
			MaxRuns:     in.MaxRuns,
			MaxBytes:    in.MaxBytes,
			NotifyAfter: tr.slotWait,
		}
		if err := tr.exec(ctx, compactOptions(), w, params, &pass); err != nil {
			st.Phase = contract.PhaseDone
			refresh()
			return res, err
		}
		res.Passes++
		res.RunsLeft = pass.RunsLeft
		res.BaseVersion = max(res.BaseVersion, pass.BaseVersion)
		st.RunsLeft = pass.RunsLeft
		if pass.Committed {
			res.Committed++
			res.RowsIn += pass.RowsIn
			res.RowsOut += pass.RowsOut
			res.DroppedDeletes += pass.DroppedDeletes
			idle = 0
		} else {
			idle++
		}
		logger.Info("Compaction pass done.", "pass", res.Passes, "committed", pass.Committed,
			"input_runs", pass.InputRuns, "runs_left", pass.RunsLeft)
		if pass.RunsLeft <= in.TargetRuns || pass.InputRuns < 2 {
			break
		}
		if idle >= compactMaxIdlePasses {
			logger.Warn("Compaction keeps losing to concurrent changes; stopping.", "passes", res.Passes)
			break
		}
	}
	st.Phase = contract.PhaseDone
	refresh()
	return res, nil
}
