package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/temporaladmin"
)

// Values of walkeeper_temporal_fairness.
const (
	fairnessUnknown = -1 // not probed yet, probe off, or the probe could not tell
	fairnessOff     = 0
	fairnessOn      = 1
)

// checkFairness probes once, in the background at start, whether the Temporal server
// dispatches by fairness key, sets walkeeper_temporal_fairness, and warns when it does not
// (docs/OPERATIONS.md "Fair share across kinds").
func (w *Worker) checkFairness(ctx context.Context) {
	on, err := temporaladmin.ProbeFairness(ctx, w.tc, w.cfg.Temporal.Namespace)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		w.metrics.temporalFairness.Set(fairnessUnknown)
		w.log.Warn("could not tell whether the Temporal server has task-queue fairness on (matching.enableFairness); "+
			"without it one kind's merge backlog delays every other kind's merges", zap.Error(err))
	case !on:
		w.metrics.temporalFairness.Set(fairnessOff)
		w.log.Warn("the Temporal server dispatches task queues in arrival order, not by fairness key: one kind's merge backlog " +
			"delays every other kind's merges; set matching.enableFairness=true (docs/OPERATIONS.md \"Fair share across kinds\")")
	default:
		w.metrics.temporalFairness.Set(fairnessOn)
		w.log.Info("Temporal task-queue fairness is on: kinds share the merge queues by --fairness-weights",
			zap.String("fairness_weights", w.cfg.FairnessWeights.String()))
	}
}
