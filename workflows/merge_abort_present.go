package workflows

import "github.com/walkeeper/walkeeper/contract"

// A pass whose Abort found its range committed counts as committed, its generations reported
// only by the attempt whose run published it, so racing runs count it once (decisions 0761, 0781).

// abortCountsOwnPassChange is the GetVersion change ID of Aborts that report a pass only when
// their own run published it.
const abortCountsOwnPassChange = "abort-counts-own-pass"

// abortReclaimed is what a pass its Abort found committed reports reclaimed. A worker older
// than contract.AbortResult.CommittedByAnother leaves it false: the pass is counted, as before.
func (r *mergeRun) abortReclaimed(p *contract.PreparedMerge, ab contract.AbortResult) int {
	if r.abortCountsOwnPass && ab.CommittedByAnother {
		return 0
	}
	return len(p.Generations)
}

// An Abort is clean-up, so it runs on a disconnected context: a Cancel would leave the staged
// files until a later round commit (decision 0281); Terminate still ends the run at once.

// abortSurvivesCancelChange is the GetVersion change ID of Aborts that a Cancel does not drop.
const abortSurvivesCancelChange = "abort-survives-cancel"
