package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/worker"
)

// The stuck line says what ends the run: Temporal at its own timeout, or the workers' scan.
func TestStuckTextSaysWhatEndsTheRun(t *testing.T) {
	own := worker.StuckRun{Reason: "workflow_task", Detail: "workflow task failing (attempt 7): boom",
		Deadline: 2 * time.Hour, OwnTimeout: true, Age: 8 * time.Minute}
	require.Equal(t, "workflow task failing (attempt 7): boom; Temporal ends it at its run timeout 2h0m0s (in 1h52m0s)", stuckText(own))

	byHand := worker.StuckRun{Reason: "workflow_task", Detail: "workflow task failing (attempt 7): boom",
		Deadline: 2 * time.Hour, Age: 8 * time.Minute}
	require.Equal(t, "workflow task failing (attempt 7): boom; no run timeout: the workers' stuck-run scan terminates it 2h0m0s after its start", stuckText(byHand))

	byHand.Age, byHand.PastDeadline = 3*time.Hour, true
	require.Equal(t, "workflow task failing (attempt 7): boom; past the deadline 2h0m0s without a run timeout: the workers' stuck-run scan terminates it", stuckText(byHand))
}
