package workflows

import "github.com/walkeeper/walkeeper/contract"

// A pass whose commit failed and whose Abort found the range committed counts as committed.
// From abortCountsOwnPassChange on it reports the pass's generations reclaimed only when the
// Abort found this attempt's own run published, as a commit that finds its range already
// committed does (decision 0761): otherwise another attempt's run holds the pass and that
// attempt reports it, so two runs racing on one pass count it once (decision 0781).

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

// An Abort is the clean-up of a preparation that will not be committed. From
// abortSurvivesCancelChange on, every Abort runs on a disconnected context with its usual
// retry policy, as clean-up does in Temporal workers, since a Cancel that reached it while it
// waited left the leftovers until a later round commit (decision 0281): a cancelled run ends
// once its Aborts have, and Terminate ends it without waiting.

// abortSurvivesCancelChange is the GetVersion change ID of Aborts that a Cancel does not drop.
const abortSurvivesCancelChange = "abort-survives-cancel"
