package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// What the worker asks the Temporal server once at start: whether it dispatches by fairness
// key, and how many partitions its task queues have.

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

// Label values of walkeeper_temporal_task_queue_partitions, and its value when the server
// could not be asked.
const (
	queueShared       = "shared" // contract.TaskQueue: workflows, round commits, fallback Prepares
	queueShard        = "shard"  // this worker's own shard queue: its Prepares
	partitionsUnknown = -1
)

// checkPartitions asks once, at start, how many partitions the server reads this worker's
// queues from, sets walkeeper_temporal_task_queue_partitions, and warns when one has more than
// one, since fairness and priority hold within a partition only (docs/OPERATIONS.md "Fair
// share across kinds").
func (w *Worker) checkPartitions(ctx context.Context, shard string) {
	for _, q := range []struct{ label, name string }{{queueShared, contract.TaskQueue}, {queueShard, contract.ShardQueue(shard)}} {
		p, err := temporaladmin.TaskQueuePartitions(ctx, w.tc, w.cfg.Temporal.Namespace, q.name)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.log.Warn("could not ask the Temporal server how many partitions a task queue has", zap.String("task_queue", q.name), zap.Error(err))
		case p.Most() > 1:
			w.metrics.taskQueuePartitions.WithLabelValues(q.label).Set(float64(p.Most()))
			w.log.Warn("a walkeeper task queue has more than one partition, and fairness and priority hold within a partition only: "+
				"a light kind's merge can wait behind another kind's backlog; set matching.numTaskqueueReadPartitions and "+
				"matching.numTaskqueueWritePartitions to 1 for walkeeper's queues (docs/OPERATIONS.md \"Fair share across kinds\")",
				zap.String("task_queue", q.name), zap.Int("workflow_partitions", p.Workflow), zap.Int("activity_partitions", p.Activity))
		default:
			w.metrics.taskQueuePartitions.WithLabelValues(q.label).Set(float64(p.Most()))
		}
	}
}
