package workflows

// An Abort is the clean-up of a preparation that will not be committed. From
// abortSurvivesCancelChange on, every Abort runs on a disconnected context with its usual
// retry policy, as clean-up does in Temporal workers, since a Cancel that reached it while it
// waited left the leftovers until a later round commit (decision 0281): a cancelled run ends
// once its Aborts have, and Terminate ends it without waiting.

// abortSurvivesCancelChange is the GetVersion change ID of Aborts that a Cancel does not drop.
const abortSurvivesCancelChange = "abort-survives-cancel"
