package workflows

import "go.temporal.io/sdk/workflow"

// An Abort is the clean-up of a preparation that will not be committed: it deletes the
// staged files and settles the attempt's claim. A Cancel that reached it while it waited for
// a worker cancelled it, and the store kept the leftovers until a later round commit collected
// them (decision 0281). From abortSurvivesCancelChange on, every Abort runs on a disconnected
// context, as clean-up does in Temporal workers, with its usual retry policy: a cancelled run
// ends once its Aborts have, and Terminate is the way to end it without waiting for them.
// A bound shorter than the retries would fail stale restarts of runs nobody cancelled
// whenever the shared queue is backed up.

// abortSurvivesCancelChange is the GetVersion change ID of Aborts that a Cancel does not drop.
const abortSurvivesCancelChange = "abort-survives-cancel"

// abortsSurviveCancel decides once, in the run's first workflow task, whether the run's
// Aborts survive a Cancel (decision 0301: a run keeps the path it started on).
func abortsSurviveCancel(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, abortSurvivesCancelChange, workflow.DefaultVersion, 1) == 1
}
