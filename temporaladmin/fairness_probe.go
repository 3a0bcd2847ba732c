package temporaladmin

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/contract"
)

// FairnessProbeQueue prefixes the task queue of each ProbeFairness call (with a random
// suffix); a server that enables fairness per queue must match it too.
const FairnessProbeQueue = contract.TaskQueue + "-fairness-probe-"

// FairnessProbeWorkflow is the type of the probe's workflows; nothing registers it.
const FairnessProbeWorkflow = "WalkeeperFairnessProbe"

// Probe sizes: tasks spread over a queue's partitions at random, so the probe counts a
// majority of probePolls and queues enough heavy tasks that no partition runs out of them.
const (
	probeHeavyTasks = 64
	probeLightTasks = 16
	probePolls      = 8
	probeTimeout    = time.Minute
)

// ErrFairnessInconclusive: the probe's polls followed neither the weights nor arrival order.
var ErrFairnessInconclusive = errors.New("fairness probe inconclusive")

// ProbeFairness tells whether the server dispatches a task queue's backlog by fairness key
// and weight or in arrival order, from up to two rounds of probeRound (80 starts and 1 to 10
// seconds each); the error is ErrFairnessInconclusive or the server's.
func ProbeFairness(ctx context.Context, c client.Client, namespace string) (bool, error) {
	namespace = cmp.Or(namespace, DefaultNamespace)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return readProbe(func() (int, error) { return probeRound(ctx, c, namespace) })
}

// readProbe runs up to two rounds (each returns how many of its probePolls polls took the
// light key) and reads the server's setting from them.
func readProbe(round func() (int, error)) (bool, error) {
	var lights, offRounds int
	for range 2 {
		var err error
		if lights, err = round(); err != nil {
			return false, err
		}
		// A FIFO server hands out at most 1 light task of 8, a fair one usually 4 or more but
		// under load sometimes as few. So one round can show fairness, but "off" takes both
		// rounds: a false "off" is a warning an operator would act on.
		switch {
		case lights >= probePolls/2:
			return true, nil
		case lights <= probePolls/8:
			offRounds++
		}
	}
	if offRounds == 2 {
		return false, nil
	}
	return false, fmt.Errorf("%w: %d of %d polls took the light key", ErrFairnessInconclusive, lights, probePolls)
}

// probeRound queues heavy-key tasks at the least weight, then light-key ones at the greatest,
// on a queue of its own, and says how many of probePolls raw polls took the light key; it
// terminates every probe workflow.
func probeRound(ctx context.Context, c client.Client, namespace string) (int, error) {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix := "walkeeper-fairness-probe/" + hex.EncodeToString(nonce[:]) + "/"
	queue := FairnessProbeQueue + hex.EncodeToString(nonce[:])
	const heavy, light = "heavy", "light"
	var ids []string
	defer func() { terminateProbes(c, ids) }()
	for _, key := range []string{heavy, light} {
		n, weight := probeHeavyTasks, float32(contract.MinFairnessWeight)
		if key == light {
			n, weight = probeLightTasks, contract.MaxFairnessWeight
		}
		for i := range n {
			id := fmt.Sprintf("%s%s/%d", prefix, key, i)
			_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: id, TaskQueue: queue, WorkflowRunTimeout: time.Minute,
				Priority: temporal.Priority{FairnessKey: key, FairnessWeight: weight},
			}, FairnessProbeWorkflow)
			if err != nil {
				return 0, fmt.Errorf("fairness probe: start: %w", err)
			}
			ids = append(ids, id)
		}
	}
	if err := waitBacklog(ctx, c, namespace, queue, len(ids)); err != nil {
		return 0, err
	}
	lights := 0
	for range probePolls {
		resp, err := c.WorkflowService().PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
			Namespace: namespace,
			TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			Identity:  "walkeeper-fairness-probe",
		})
		if err != nil {
			return 0, fmt.Errorf("fairness probe: poll: %w", err)
		}
		if strings.HasPrefix(resp.GetWorkflowExecution().GetWorkflowId(), prefix+light+"/") {
			lights++
		}
	}
	return lights, nil
}

// waitBacklog waits until the probe queue holds n tasks, so the polls choose among them all.
func waitBacklog(ctx context.Context, c client.Client, namespace, queue string, n int) error {
	for {
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     namespace,
			TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
			ReportStats:   true,
		})
		if err != nil {
			return fmt.Errorf("fairness probe: describe: %w", err)
		}
		if resp.GetStats().GetApproximateBacklogCount() >= int64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fairness probe: %d tasks never showed in the backlog: %w", n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// terminateProbes ends the probe's workflows (their one-minute run timeout would anyway).
func terminateProbes(c client.Client, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(8)
	for _, id := range ids {
		g.Go(func() error { return c.TerminateWorkflow(ctx, id, "", "fairness probe done") })
	}
	_ = g.Wait() // best effort: the run timeout ends what a terminate missed
}

// QueuePartitions is how many read partitions the server gives one task queue, per task type.
type QueuePartitions struct {
	Workflow int
	Activity int
}

// Most is the larger of the two counts.
func (p QueuePartitions) Most() int { return max(p.Workflow, p.Activity) }

// TaskQueuePartitions asks the server how many partitions it reads queue from (one request,
// no action), since fairness and priority hold within a partition only (docs/OPERATIONS.md
// "Fair share across kinds").
func TaskQueuePartitions(ctx context.Context, c client.Client, namespace, queue string) (QueuePartitions, error) {
	namespace = cmp.Or(namespace, DefaultNamespace)
	resp, err := c.WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: namespace,
		TaskQueue: &taskqueuepb.TaskQueue{Name: queue},
	})
	if err != nil {
		return QueuePartitions{}, fmt.Errorf("list partitions of task queue %s: %w", queue, err)
	}
	return QueuePartitions{Workflow: len(resp.GetWorkflowTaskQueuePartitions()),
		Activity: len(resp.GetActivityTaskQueuePartitions())}, nil
}
