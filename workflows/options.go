package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// Activity options. Changing any value here changes the commands a workflow issues; the
// replay tests (testdata/replay) catch the difference.

func retryPolicy(maxAttempts int32, maxInterval time.Duration) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		MaximumAttempts:        maxAttempts,
		NonRetryableErrorTypes: contract.NonRetryableErrorTypes,
	}
}

// prepareOptions: long, heartbeating (the budget wait heartbeats too). Retries are bounded
// so that one broken shard ends up recorded as failed instead of stalling the table.
func prepareOptions(startToClose, scheduleToStart time.Duration, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToStartTimeout: scheduleToStart,
		StartToCloseTimeout:    startToClose,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            retryPolicy(5, time.Minute),
		Summary:                summary,
	}
}

// commitRoundOptions: on the shared queue (a round spans owners), retried more than a prepare
// since a commit is cheap to repeat; the heartbeat timeout notices a task lost in delivery
// after a minute, and a round shorter than a third of it sends no heartbeat.
func commitRoundOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(10, 30*time.Second),
		Summary:             summary,
	}
}

func abortOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryPolicy(10, 30*time.Second),
		Summary:             summary,
	}
}

// localListOptions: ListPendingShards as a local activity, which cannot heartbeat nor be seen
// by the server, so it is bounded end to end (30 s an attempt, 2 minutes, 5 attempts) with a
// backoff under the workflow task timeout, so retries need no timer.
func localListOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            retryPolicy(5, 8*time.Second),
		Summary:                "list pending shards",
	}
}

func compactOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(5, time.Minute),
		Summary:             "compact base",
	}
}

// startWorkflowsOptions: the heartbeat timeout notices a task lost in delivery after a minute,
// not the whole start-to-close timeout; the activity heartbeats while its starts wait.
func startWorkflowsOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           contract.TaskQueue,
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(5, 30*time.Second),
		Summary:             "start workflows",
	}
}
