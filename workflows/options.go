package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// Activity options. Changing a value here changes the commands workflows issue from then on,
// which the replay tests (testdata/replay) do not catch: replay matches an activity by ID and
// type only.

func retryPolicy(maxAttempts int32, maxInterval time.Duration) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		MaximumAttempts:        maxAttempts,
		NonRetryableErrorTypes: contract.NonRetryableErrorTypes,
	}
}

// activityOptions is the shape of every walkeeper activity's options: one attempt's
// timeout, a heartbeat timeout (0 = none), a bounded retry policy and its Temporal Web summary.
func activityOptions(startToClose, heartbeat time.Duration, retry *temporal.RetryPolicy, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: startToClose, HeartbeatTimeout: heartbeat, RetryPolicy: retry, Summary: summary}
}

// onSharedQueue is o on the shared task queue.
func onSharedQueue(o workflow.ActivityOptions) workflow.ActivityOptions {
	o.TaskQueue = contract.TaskQueue
	return o
}

// prepareOptions: long, heartbeating (the budget wait heartbeats too). Retries are bounded
// so that one broken shard ends up recorded as failed instead of stalling the table.
func prepareOptions(startToClose, scheduleToStart time.Duration, summary string) workflow.ActivityOptions {
	o := activityOptions(startToClose, time.Minute, retryPolicy(5, time.Minute), summary)
	o.ScheduleToStartTimeout = scheduleToStart
	return o
}

// commitRoundOptions: on the shared queue (a round spans owners), retried more than a prepare
// since a commit is cheap to repeat; the heartbeat timeout notices a task lost in delivery
// after a minute, and a round shorter than a third of it sends no heartbeat.
func commitRoundOptions(summary string) workflow.ActivityOptions {
	return activityOptions(5*time.Minute, time.Minute, retryPolicy(10, 30*time.Second), summary)
}

func abortOptions(summary string) workflow.ActivityOptions {
	return activityOptions(2*time.Minute, 0, retryPolicy(10, 30*time.Second), summary)
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
	return activityOptions(time.Hour, time.Minute, retryPolicy(5, time.Minute), "compact base")
}

// startWorkflowsOptions: the heartbeat timeout notices a task lost in delivery after a minute,
// not the whole start-to-close timeout; the activity heartbeats while its starts wait.
func startWorkflowsOptions() workflow.ActivityOptions {
	return onSharedQueue(activityOptions(2*time.Minute, time.Minute, retryPolicy(5, 30*time.Second), "start workflows"))
}

// demandScanOptions: one heartbeating, bounded-retry listing per kind. After the last
// attempt the sweep fails with ErrTypeSweepListFailed, never retrying silently for ever.
func demandScanOptions() workflow.ActivityOptions {
	return onSharedQueue(activityOptions(10*time.Minute, time.Minute, retryPolicy(5, 30*time.Second), "scan demand index"))
}

func recordMaintenanceOptions() workflow.ActivityOptions {
	return onSharedQueue(activityOptions(30*time.Second, 0, retryPolicy(3, 10*time.Second), "record success"))
}

// reconcilePageOptions: one registry page per activity, bounded retries; after the last
// attempt the reconcile fails with ErrTypeReconcileFailed.
func reconcilePageOptions() workflow.ActivityOptions {
	return onSharedQueue(activityOptions(15*time.Minute, time.Minute, retryPolicy(5, time.Minute), "reconcile registry page"))
}

// prioritized is o at the merge's task-queue priority from the input, which the whole chain
// carries, so a run started without it (Temporal CLI or Web) still has fair activities and
// the weight replays.
func (r *mergeRun) prioritized(o workflow.ActivityOptions) workflow.ActivityOptions {
	o.Priority = contract.MergePriority(r.target.Kind, r.in.Urgent, r.in.FairnessWeight)
	return o
}
