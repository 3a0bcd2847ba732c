package contract

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/target"
)

func TestNamesAndIDs(t *testing.T) {
	tg, err := target.ParseTarget("generic:gs")
	require.NoError(t, err)
	require.Equal(t, "merge-wal/generic/gs", MergeWalID(tg))
	require.Equal(t, "compact/generic/gs", CompactID(tg))
	require.Equal(t, "walkeeper-shard-abc", ShardQueue("abc"))
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttributes[WalTarget.GetName()])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttributes[WalKind.GetName()])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_INT, SearchAttributes[WalPending.GetName()])
	require.Len(t, SearchAttributes, 3)
}

func TestStartOptionsDedupeOnTargetID(t *testing.T) {
	tg, err := target.ParseTarget("rollout:r1")
	require.NoError(t, err)
	o := startOptions(MergeWalID(tg), tg)
	require.Equal(t, "merge-wal/rollout/r1", o.ID)
	require.Equal(t, TaskQueue, o.TaskQueue)
	require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, o.WorkflowIDConflictPolicy)
	require.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, o.WorkflowIDReusePolicy)
	require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
	v, ok := o.TypedSearchAttributes.GetKeyword(WalTarget)
	require.True(t, ok)
	require.Equal(t, "rollout:r1", v)
	v, ok = o.TypedSearchAttributes.GetKeyword(WalKind)
	require.True(t, ok)
	require.Equal(t, "rollout", v)
}

func TestStartMergeWalAndCompactBaseUseTheTargetID(t *testing.T) {
	tg, err := target.ParseTarget("generic:gs")
	require.NoError(t, err)
	c := &mocks.Client{}
	run := &mocks.WorkflowRun{}
	var got []client.StartWorkflowOptions
	var types []any
	var inputs []any
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		Run(func(args mock.Arguments) {
			got = append(got, args.Get(1).(client.StartWorkflowOptions))
			types = append(types, args.Get(2))
			inputs = append(inputs, args.Get(3))
		}).Return(run, nil)

	_, err = StartMergeWal(context.Background(), c, tg, MergeWalInput{Target: "ignored:x", ParallelPrepare: true})
	require.NoError(t, err)
	_, err = StartCompactBase(context.Background(), c, tg, CompactBaseInput{})
	require.NoError(t, err)

	require.Len(t, got, 2)
	require.Equal(t, "merge-wal/generic/gs", got[0].ID)
	require.Equal(t, "compact/generic/gs", got[1].ID)
	require.Equal(t, []any{MergeWalWorkflow, CompactBaseWorkflow}, types)
	require.Equal(t, MergeWalInput{Target: "generic:gs", ParallelPrepare: true}, inputs[0], "the target argument wins")
	require.Equal(t, CompactBaseInput{Target: "generic:gs"}, inputs[1])
	for _, o := range got {
		require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, o.WorkflowIDConflictPolicy)
		require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
		require.Contains(t, o.StaticSummary, "generic:gs")
	}
}
