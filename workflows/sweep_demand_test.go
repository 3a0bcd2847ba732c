package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
)

func demandFor(byKind map[string]contract.ScanDemandResult) func(context.Context, contract.ScanDemandParams) (contract.ScanDemandResult, error) {
	return func(_ context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
		r := byKind[p.Kind]
		r.Kind = p.Kind
		return r, nil
	}
}

// The default sweep lists the demand index (ScanDemand) and never reads stats: it starts
// the candidates over a threshold, most indebted first, compaction markers included, and
// records its success.
func TestDemandSweepStartsCandidatesInDebtOrder(t *testing.T) {
	env := newEnv(t)
	var params []contract.ScanDemandParams
	var paramsMu sync.Mutex // the testsuite runs the per-kind scans concurrently
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
		paramsMu.Lock()
		params = append(params, p)
		paramsMu.Unlock()
		return demandFor(map[string]contract.ScanDemandResult{
			"generic": {StoresWithDebt: 40, Records: 90, Qualified: 5, Targets: []contract.DemandTarget{
				{Target: "generic:old", Pending: 1, MaxShardPending: 1, PendingShards: 1, OldestPendingAge: time.Hour},
				{Target: "generic:hot", Pending: 30, MaxShardPending: 10, PendingShards: 3},
				{Target: "generic:runs", Compact: true},
			}},
		})(ctx, p)
	})
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	var recorded []string
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(func(_ context.Context, p contract.RecordMaintenanceParams) error {
		recorded = append(recorded, p.Workflow)
		return nil
	})
	var ran []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		ran = append(ran, info.ActivityType.Name)
	})
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{MaxStarts: 10})
	res := resultOf[contract.MaintenanceSweepResult](t, env)

	require.Len(t, params, 3)
	for _, p := range params {
		require.Equal(t, 10, p.MaxCandidates)
		require.Equal(t, contract.DefaultSweepMergeMinGenerations, p.MergeMinGenerations)
		require.Equal(t, contract.DefaultSweepMaxPendingAge, p.MaxPendingAge)
	}
	require.Equal(t, []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:hot", ParallelPrepare: true,
			Trigger: contract.TriggerSweepCount, Reason: "30 pending >= 8", Pending: 30},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:old",
			Trigger: contract.TriggerSweepAge, Reason: "oldest pending 1h0m0s >= 10m0s, 1 pending", Urgent: true, Pending: 1},
		{Workflow: contract.CompactBaseWorkflow, Target: "generic:runs",
			Trigger: contract.TriggerSweepRuns, Reason: "compaction marker: base runs >= compact_demand_runs"},
	}, starter.requests)
	require.Equal(t, 40, res.StoresWithDebt)
	require.Equal(t, 90, res.DemandRecords)
	require.Equal(t, 2, res.SkippedOmitted, "qualified stores beyond the candidates wait for the next sweep")
	require.Len(t, res.Started, 3)
	require.Equal(t, []string{contract.MaintenanceSweepName}, recorded)
}

// MaxStarts caps the starts across kinds, most indebted first within each kind.
func TestDemandSweepMaxStartsCaps(t *testing.T) {
	env := newEnv(t)
	var ts []contract.DemandTarget
	for _, n := range []string{"a", "b", "c", "d"} {
		ts = append(ts, contract.DemandTarget{Target: "generic:" + n, Pending: 9, MaxShardPending: 9, PendingShards: 1})
	}
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(demandFor(map[string]contract.ScanDemandResult{
		"generic": {StoresWithDebt: 4, Qualified: 4, Targets: ts},
	}))
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{MaxStarts: 2})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, starter.requests, 2)
	require.Equal(t, "generic:a", starter.requests[0].Target)
	require.Equal(t, "generic:b", starter.requests[1].Target)
}

// A kind whose listing keeps failing fails the sweep visibly, with a non-retryable
// SweepListFailed, after the other kinds' starts; no success is recorded.
func TestDemandSweepFailsLoudlyWhenAListingFails(t *testing.T) {
	env := newEnv(t)
	attempts := 0
	env.OnActivity(contract.ScanDemandActivity, anyCtx, demandOfKind("rollout")).
		Return(func(context.Context, contract.ScanDemandParams) (contract.ScanDemandResult, error) {
			attempts++
			return contract.ScanDemandResult{}, errors.New("list _demand/rollout/: connection reset")
		})
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(demandFor(map[string]contract.ScanDemandResult{
		"generic": {StoresWithDebt: 1, Qualified: 1, Targets: []contract.DemandTarget{{Target: "generic:hot", Pending: 9, MaxShardPending: 9, PendingShards: 1}}},
	}))
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	recorded := 0
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(func(context.Context, contract.RecordMaintenanceParams) error {
		recorded++
		return nil
	}).Maybe()
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{})
	appErr := requireNonRetryable(t, env, contract.ErrTypeSweepListFailed)
	require.Contains(t, appErr.Error(), "rollout")
	require.Equal(t, 5, attempts, "bounded retries, then the failure")
	require.Len(t, starter.requests, 1, "the kinds that listed were still served")
	require.Zero(t, recorded)
}

func TestPlanDemandIsPure(t *testing.T) {
	in := contract.MaintenanceSweepInput{}.WithDefaults()
	ts := []contract.DemandTarget{
		{Target: "generic:b", Pending: 2, MaxShardPending: 2, PendingShards: 1},
		{Target: "generic:a", Pending: 8, MaxShardPending: 4, PendingShards: 2},
		{Target: "generic:c", Pending: 1, MaxShardPending: 1, PendingShards: 1, OldestPendingAge: time.Hour},
	}
	p1 := planDemandWithin(ts, in, 10)
	p2 := planDemandWithin([]contract.DemandTarget{ts[2], ts[0], ts[1]}, in, 10)
	require.Equal(t, p1, p2)
	require.Len(t, p1.starts, 2)
	require.Equal(t, "generic:a", p1.starts[0].req.Target)
	require.Equal(t, "generic:c", p1.starts[1].req.Target)
	require.Equal(t, []contract.SweepSkip{{Target: "generic:b", Reason: "below thresholds"}}, p1.skipped)
}
