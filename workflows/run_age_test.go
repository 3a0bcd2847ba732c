package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// A long merge hands over to a fresh run at half its run timeout, long before its pass
// count would, so a run timeout never cuts a merge that makes progress.
func TestMergeWalContinuesAsNewHalfWayThroughItsRunTimeout(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{WorkflowRunTimeout: 10 * time.Minute})
	f := newFakeTable("generic:gs", 1, map[string]int{"a": 100})
	mockTimedTable(env, f, time.Minute, 10*time.Second)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	require.True(t, env.IsWorkflowCompleted())
	next := continueAsNewInput(t, env.GetWorkflowError())
	passes := next.Carry.Shards[0].Passes
	// A pass takes 70 s of workflow time: the hand-over comes after the pass that crosses
	// 5 minutes, far below the 100 passes a run may take.
	require.GreaterOrEqual(t, passes, 4)
	require.LessOrEqual(t, passes, 6)
	require.Less(t, passes, contract.DefaultPassesPerWorkflowRun)
}

// CompactBase does not continue as new: it stops starting passes half-way through its run
// timeout and the next trigger goes on from the committed passes.
func TestCompactBaseStopsHalfWayThroughItsRunTimeout(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{WorkflowRunTimeout: 10 * time.Minute})
	env.OnActivity(contract.CompactBaseActivity, anyCtx, anyArg).After(3*time.Minute).
		Return(contract.CompactPassResult{InputRuns: 16, RunsLeft: 500, Committed: true}, nil)
	env.ExecuteWorkflow(CompactBase, contract.CompactBaseInput{Target: "generic:gs"})
	res := resultOf[contract.CompactBaseResult](t, env)
	require.Equal(t, 2, res.Passes, "the pass that crossed 5 minutes is the last")
	require.Equal(t, 500, res.RunsLeft)
}
