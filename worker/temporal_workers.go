package worker

import (
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/workflows"
)

// TemporalWorkers sizes the two Temporal workers of one walkeeper process, on the shared queue
// and on its own shard queue (activities only); the benchmarks' nodes are wired with it too.
type TemporalWorkers struct {
	Identity string
	// SharedActivitySlots bounds the activities in flight on the shared queue.
	SharedActivitySlots int
	// LocalActivitySlots bounds its local activities (MergeWal's listings; 0 = the SDK's
	// 1,000).
	LocalActivitySlots int
	// MergeSlots bounds the activities in flight on the shard queue, ShardPollers its
	// pollers (0 = the SDK default).
	MergeSlots   int
	ShardPollers int
	StopTimeout  time.Duration
	// DeadlockDetection overrides the SDK's workflow deadlock detector (0 = its 1 s).
	DeadlockDetection time.Duration
	// ShardOnly leaves out the shared-queue worker.
	ShardOnly bool
	// OnFatalError is called when a worker stops on an error the SDK does not retry (nil:
	// the SDK only logs it); such a worker never polls again.
	OnFatalError func(error)
}

// New builds the workers for shard, acts registered on each, not yet started.
func (o TemporalWorkers) New(c client.Client, shard string, acts *activities.Activities) []tworker.Worker {
	var tws []tworker.Worker
	if !o.ShardOnly {
		shared := tworker.New(c, contract.TaskQueue, tworker.Options{
			Identity:                                o.Identity,
			MaxConcurrentActivityExecutionSize:      o.SharedActivitySlots,
			MaxConcurrentLocalActivityExecutionSize: o.LocalActivitySlots,
			WorkerStopTimeout:                       o.StopTimeout,
			DeadlockDetectionTimeout:                o.DeadlockDetection,
			OnFatalError:                            o.OnFatalError,
		})
		workflows.Register(shared)
		activities.Register(shared, acts)
		tws = append(tws, shared)
	}
	own := tworker.New(c, contract.ShardQueue(shard), tworker.Options{
		Identity:                           o.Identity,
		MaxConcurrentActivityExecutionSize: o.MergeSlots,
		MaxConcurrentActivityTaskPollers:   o.ShardPollers,
		WorkerStopTimeout:                  o.StopTimeout,
		DisableWorkflowWorker:              true,
		OnFatalError:                       o.OnFatalError,
	})
	activities.Register(own, acts)
	return append(tws, own)
}
