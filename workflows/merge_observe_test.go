package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// A finished merge says in its search attributes, memo and current details why it ran, how
// far behind the store was and what it folded; a start by hand without a trigger is
// recorded as "unknown".
func TestMergeWalRecordsTriggerDebtAndOutcome(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:demo", 2, map[string]int{"aaaa1111-x": 3, "bbbb2222-y": 2})
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(
		func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
			res, err := f.prepare(ctx, p)
			if res.Prepared != nil {
				res.Prepared.Bytes = int64(len(res.Prepared.Generations)) << 20
			}
			return res, err
		})
	mockTable(env, f)
	var upserts []temporal.SearchAttributes
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	var memos []map[string]any
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		memos = append(memos, args.Get(0).(map[string]any))
	}).Return(nil)
	activities, listings := 0, 0
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { activities++ })
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { listings++ })

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:demo"})
	res := mergeResult(t, env)
	require.Equal(t, 5, res.Reclaimed)
	require.Equal(t, 3, res.Passes)
	require.Equal(t, int64(5)<<20, res.BytesMerged)
	require.Equal(t, 5, res.PendingAtStart)

	// Search attributes: the bare start gets WalTarget/WalKind/WalTrigger in one upsert; the
	// end records the outcome in one more; nothing in between (the listings' figures are in
	// the details and the status query).
	require.Len(t, upserts, 2, "the bare start's target attributes and the outcome")
	final := map[string]any{}
	for _, sa := range upserts {
		for k, v := range sa.GetUntypedValues() {
			final[k.GetName()] = v
		}
	}
	require.Equal(t, "generic:demo", final[contract.WalTargetName])
	require.Equal(t, contract.TriggerUnknown, final[contract.WalTriggerName])
	require.EqualValues(t, 5, final[contract.WalPendingAtStartName])
	require.EqualValues(t, 5, final[contract.WalReclaimedName])
	require.EqualValues(t, float64(5<<20), final[contract.WalBytesMergedName])
	require.EqualValues(t, 0, final[contract.WalPendingName])
	last := upserts[len(upserts)-1]
	_, ok := last.GetInt64(contract.WalReclaimed)
	require.True(t, ok, "the outcome is one upsert at the end")
	_, targetAgain := last.GetKeyword(contract.WalTarget)
	require.False(t, targetAgain, "the target attributes are upserted once, at the bare start")
	_, pendingEarly := upserts[0].GetInt64(contract.WalPending)
	require.False(t, pendingEarly, "WalPending is upserted once, with the outcome")

	require.Len(t, memos, 1, "the memo is written once, at the end")
	require.Equal(t, map[string]any{
		contract.MemoTrigger:        contract.TriggerUnknown,
		contract.MemoPendingAtStart: 5,
		contract.MemoReclaimed:      5,
		contract.MemoBytesMerged:    int64(5) << 20,
		contract.MemoPasses:         3,
		contract.MemoActions:        res.Actions,
	}, memos[0])
	// The run's own count: its start, both upserts, each activity and each listing (each in a
	// workflow task of its own); nothing retried, no signal.
	require.Equal(t, 1+2+activities+listings, res.Actions, "%d activities, %d listings", activities, listings)

	details := currentDetails(t, env)
	require.True(t, strings.HasPrefix(details, "**generic:demo** done — 2 shards, 5 generations reclaimed, 5.0 MiB in 3 passes"), details)
	require.Contains(t, details, "5 pending at start · triggered by unknown")
	require.True(t, strings.HasSuffix(details, fmt.Sprintf(" · %d Temporal actions", res.Actions)), details)
}

// A run whose start set its search attributes (contract.StartMergeWal with
// contract.PendingAtStart) upserts exactly once, the outcome, whose listed figure replaces the
// starter's; the trigger it passes reaches the memo and the details, and the static summary is
// the start helper's.
func TestMergeWalStartedWithAttributesUpsertsOnceAndNamesTheTrigger(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:demo", 8, map[string]int{"aaaa1111-x": 1})
	mockTable(env, f)
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		contract.WalTarget.ValueSet("generic:demo"), contract.WalKind.ValueSet("generic"),
		contract.WalTrigger.ValueSet(contract.TriggerSweepAge),
		contract.WalPending.ValueSet(4), contract.WalPendingAtStart.ValueSet(4))))
	var upserts []temporal.SearchAttributes
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	var memo map[string]any
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) { memo = args.Get(0).(map[string]any) }).Return(nil)
	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:demo",
		Trigger: contract.TriggerSweepAge, TriggerReason: "oldest pending 11m0s >= 10m0s, 1 pending"})
	res := mergeResult(t, env)
	require.Equal(t, 1, res.Reclaimed)
	require.Len(t, upserts, 1, "only the outcome")
	pending, _ := upserts[0].GetInt64(contract.WalPending)
	atStart, _ := upserts[0].GetInt64(contract.WalPendingAtStart)
	reclaimed, _ := upserts[0].GetInt64(contract.WalReclaimed)
	require.Equal(t, []int64{0, 1, 1}, []int64{pending, atStart, reclaimed}, "the listing's figure replaces the starter's at the end")
	require.Equal(t, contract.TriggerSweepAge, memo[contract.MemoTrigger])
	require.Equal(t, "oldest pending 11m0s >= 10m0s, 1 pending", memo[contract.MemoTriggerReason])
	require.Contains(t, currentDetails(t, env), "1 shard, 1 generation reclaimed, 0 B in 1 pass\n\n1 pending at start · triggered by sweep-age (oldest pending 11m0s >= 10m0s, 1 pending)")
}

func currentDetails(t *testing.T, env interface {
	QueryWorkflow(string, ...any) (converter.EncodedValue, error)
}) string {
	t.Helper()
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

func TestPlural(t *testing.T) {
	require.Equal(t, "1 pass", plural(1, "pass"))
	require.Equal(t, "3 passes", plural(3, "pass"))
	require.Equal(t, "2 shards", plural(2, "shard"))
}
