package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// An Abort is the clean-up of a preparation that will not be committed: it deletes the
// staged files and settles the attempt's claim. A Cancel that reached it while it waited for
// a worker cancelled it, and the store kept the leftovers until a later round commit collected
// them (decision 0281). From abortSurvivesCancelChange on, every Abort runs on a disconnected
// context, as clean-up does in Temporal workers, and abortTimeout bounds it from its
// scheduling, retries included, so a cancelled run still ends within that time.

// abortSurvivesCancelChange is the GetVersion change ID of Aborts that a Cancel does not drop.
const abortSurvivesCancelChange = "abort-survives-cancel"

// abortTimeout is the schedule-to-close timeout of an Abort on the abort-survives-cancel
// path: the longest a Cancel waits for the clean-up of a pass.
const abortTimeout = 2 * time.Minute

// abortsSurviveCancel decides once, in the run's first workflow task, whether the run's
// Aborts survive a Cancel (decision 0301: a run keeps the path it started on).
func abortsSurviveCancel(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, abortSurvivesCancelChange, workflow.DefaultVersion, 1) == 1
}
