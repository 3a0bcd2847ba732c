package temporaladmin

import (
	"cmp"
	"context"
	"fmt"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

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
