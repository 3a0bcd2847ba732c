package contract

import (
	"context"
	"math"
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
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, SearchAttributes[WalTrigger.GetName()])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_INT, SearchAttributes[WalPendingAtStartName])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_INT, SearchAttributes[WalReclaimedName])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_DOUBLE, SearchAttributes[WalBytesMergedName])
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_DOUBLE, SearchAttributes[WalSweepStarts.GetName()])
	require.Len(t, SearchAttributes, 8)
	ints := 0
	for _, typ := range SearchAttributes {
		if typ == enumspb.INDEXED_VALUE_TYPE_INT {
			ints++
		}
	}
	require.LessOrEqual(t, ints, 3, "SQL visibility has 3 Int slots per namespace")
}

func TestStartOptionsDedupeOnTargetID(t *testing.T) {
	tg, err := target.ParseTarget("rollout:r1")
	require.NoError(t, err)
	o := startOptions(MergeWalID(tg), tg, TriggerSweepAge, "oldest pending 11m0s >= 10m0s")
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
	v, ok = o.TypedSearchAttributes.GetKeyword(WalTrigger)
	require.True(t, ok)
	require.Equal(t, TriggerSweepAge, v)
	require.Equal(t, map[string]any{MemoTrigger: TriggerSweepAge, MemoTriggerReason: "oldest pending 11m0s >= 10m0s"}, o.Memo)

	// A start that names no trigger says so.
	o = startOptions(MergeWalID(tg), tg, "", "")
	v, _ = o.TypedSearchAttributes.GetKeyword(WalTrigger)
	require.Equal(t, TriggerUnknown, v)
	require.Equal(t, map[string]any{MemoTrigger: TriggerUnknown}, o.Memo)
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

	_, err = StartMergeWal(context.Background(), c, tg, MergeWalInput{Target: "ignored:x", ParallelPrepare: true,
		Trigger: TriggerSweepCount, TriggerReason: "37 pending >= 8"})
	require.NoError(t, err)
	_, err = StartCompactBase(context.Background(), c, tg, CompactBaseInput{})
	require.NoError(t, err)

	require.Len(t, got, 2)
	require.Equal(t, "merge-wal/generic/gs", got[0].ID)
	require.Equal(t, "compact/generic/gs", got[1].ID)
	require.Equal(t, []any{MergeWalWorkflow, CompactBaseWorkflow}, types)
	require.Equal(t, MergeWalInput{Target: "generic:gs", ParallelPrepare: true, Trigger: TriggerSweepCount,
		TriggerReason: "37 pending >= 8"}, inputs[0], "the target argument wins")
	require.Equal(t, CompactBaseInput{Target: "generic:gs", Trigger: TriggerUnknown}, inputs[1])
	require.Equal(t, "Merge WAL of generic:gs — triggered by sweep-count (37 pending >= 8)", got[0].StaticSummary)
	require.Equal(t, "Compact base of generic:gs — triggered by unknown", got[1].StaticSummary)
	for _, o := range got {
		require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, o.WorkflowIDConflictPolicy)
		require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
		require.Contains(t, o.StaticSummary, "generic:gs")
	}
}

// PendingAtStart sets WalPending and WalPendingAtStart beside the start's own attributes
// when the starter knows a count; an unknown (0) or garbage (negative) one leaves both to
// the run's end, and any int fits the Int attributes.
func TestPendingAtStartRidesTheStart(t *testing.T) {
	tg, err := target.ParseTarget("generic:gs")
	require.NoError(t, err)
	for _, n := range []int{math.MinInt, -1, 0, 1, 7, math.MaxInt} {
		o := startOptions(MergeWalID(tg), tg, TriggerCount, "")
		PendingAtStart(n)(&o)
		kind, ok := o.TypedSearchAttributes.GetKeyword(WalKind)
		require.True(t, ok, "n=%d: the start's own attributes stay", n)
		require.Equal(t, "generic", kind)
		pending, set := o.TypedSearchAttributes.GetInt64(WalPending)
		atStart, setAtStart := o.TypedSearchAttributes.GetInt64(WalPendingAtStart)
		require.Equal(t, n > 0, set, "n=%d", n)
		require.Equal(t, n > 0, setAtStart, "n=%d", n)
		if n > 0 {
			require.Equal(t, []int64{int64(n), int64(n)}, []int64{pending, atStart})
		}
	}
}
