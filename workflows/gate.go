package workflows

import "go.temporal.io/sdk/workflow"

// gated reports whether this run takes the path of GetVersion change (version 1), decided at
// the run's first call and kept for the whole run (decision 0301).
func gated(ctx workflow.Context, change string) bool {
	return workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == 1
}
