package workflows

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// scheduledPriorities records the priority each activity is scheduled with, as the workflow
// hands it to the SDK (the test environment does not pass it on to the activity's info).
type scheduledPriorities struct {
	interceptor.WorkerInterceptorBase
	mu  sync.Mutex
	got map[string][]temporal.Priority // activity type -> priorities in schedule order
}

func (s *scheduledPriorities) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &priorityInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, rec: s}
}

type priorityInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rec *scheduledPriorities
}

func (i *priorityInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&priorityOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, rec: i.rec})
}

type priorityOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rec *scheduledPriorities
}

func (o *priorityOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.rec.mu.Lock()
	o.rec.got[activityType] = append(o.rec.got[activityType], workflow.GetActivityOptions(ctx).Priority)
	o.rec.mu.Unlock()
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// TestMergeWalActivitiesCarryTheInputsPriority: every Prepare and CommitRound of a merge is
// scheduled with the kind as fairness key, the input's weight and the urgency's priority
// key, so a kind's merges take turns with other kinds' on the shared queues.
func TestMergeWalActivitiesCarryTheInputsPriority(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   contract.MergeWalInput
		want temporal.Priority
	}{
		{"routine, default weight", contract.MergeWalInput{Target: "generic:gs"},
			temporal.Priority{PriorityKey: contract.PriorityRoutineMerge, FairnessKey: "generic", FairnessWeight: 1}},
		{"urgent, weighted", contract.MergeWalInput{Target: "rollout:rl", Urgent: true, FairnessWeight: 2.5},
			temporal.Priority{PriorityKey: contract.PriorityUrgentMerge, FairnessKey: "rollout", FairnessWeight: 2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			rec := &scheduledPriorities{got: map[string][]temporal.Priority{}}
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: []interceptor.WorkerInterceptor{rec}})
			f := newFakeTable(tc.in.Target, 1, map[string]int{"a": 2, "b": 1})
			mockTable(env, f)
			env.ExecuteWorkflow(MergeWal, tc.in)
			mergeResult(t, env)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			require.Len(t, rec.got[contract.PrepareActivity], 3)
			require.NotEmpty(t, rec.got[contract.CommitRoundActivity])
			for _, name := range []string{contract.PrepareActivity, contract.CommitRoundActivity} {
				for _, p := range rec.got[name] {
					require.Equal(t, tc.want, p, name)
				}
			}
		})
	}
}
