package workflows

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// fakeStarter records StartWorkflows requests and answers each with its ID.
type fakeStarter struct {
	mu       sync.Mutex
	requests []contract.StartRequest
	batches  int
	fail     map[string]string // target -> error
	// validate fails, as the activity does (contract.StartMergeWal refuses it), a batch with
	// a request whose MergeWal input is out of bounds.
	validate bool
}

func (s *fakeStarter) start(_ context.Context, p contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	var res contract.StartWorkflowsResult
	for _, r := range p.Starts {
		in := contract.MergeWalInput{Target: r.Target, Trigger: r.Trigger, TriggerReason: r.Reason}
		if err := in.Validate(); s.validate && err != nil {
			return contract.StartWorkflowsResult{}, err
		}
	}
	for _, r := range p.Starts {
		s.requests = append(s.requests, r)
		t, err := target.ParseTarget(r.Target)
		if err != nil {
			return res, err
		}
		o := contract.StartOutcome{Workflow: r.Workflow, Target: r.Target, RunID: "run-" + r.Target}
		if r.Workflow == contract.MergeWalWorkflow {
			o.WorkflowID = contract.MergeWalID(t)
		} else {
			o.WorkflowID = contract.CompactID(t)
		}
		if msg := s.fail[r.Target]; msg != "" {
			o.Error, o.RunID = msg, ""
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	return res, nil
}

// A slow kind's listing must not hold up the starts of a kind whose listing is back
// (a 300-store rollout listing held up the hot generic store's merge in the incident replay).
func TestMaintenanceSweepStartsEachKindAsItsListingReturns(t *testing.T) {
	demand := map[string]contract.ScanDemandResult{
		"rollout": {Targets: []contract.DemandTarget{{Target: "rollout:r", Pending: 9, MaxShardPending: 9, PendingShards: 1}}, StoresWithDebt: 1, Qualified: 1},
		"generic": {Targets: []contract.DemandTarget{{Target: "generic:hot", Pending: 80, MaxShardPending: 4, PendingShards: 20}}, StoresWithDebt: 1, Qualified: 1},
	}
	run := func(t *testing.T, in contract.MaintenanceSweepInput) ([]string, *fakeStarter) {
		env := newEnv(t)
		env.OnActivity(contract.ScanDemandActivity, anyCtx, demandOfKind("rollout")).After(10 * time.Minute).Return(demandFor(demand))
		env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(demandFor(demand))
		starter := &fakeStarter{}
		env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
		var done []string
		env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
			if info.ActivityType.Name != contract.RecordMaintenanceActivity {
				done = append(done, info.ActivityType.Name)
			}
		})
		env.ExecuteWorkflow(MaintenanceSweep, in)
		require.NoError(t, env.GetWorkflowError())
		return done, starter
	}
	t.Run("per kind", func(t *testing.T) {
		done, starter := run(t, contract.MaintenanceSweepInput{})
		// The generic and datagen listings and the generic start may complete in any order
		// (the test environment runs activities concurrently); what matters is that a start
		// completed before the slow rollout listing, which is the last to complete.
		lastScan := -1
		for i, name := range done {
			if name == contract.ScanDemandActivity {
				lastScan = i
			}
		}
		require.Less(t, slices.Index(done, contract.StartWorkflowsActivity), lastScan,
			"the generic store's merge starts before the slow rollout listing is back: %v", done)
		require.Equal(t, []contract.StartRequest{
			{Workflow: contract.MergeWalWorkflow, Target: "generic:hot", ParallelPrepare: true, Trigger: contract.TriggerSweepCount, Reason: "80 pending >= 8", Urgent: true, Pending: 80},
			{Workflow: contract.MergeWalWorkflow, Target: "rollout:r", Trigger: contract.TriggerSweepCount, Reason: "9 pending >= 8", Pending: 9},
		}, starter.requests)
	})
	t.Run("parallel prepare off", func(t *testing.T) {
		off := false
		_, starter := run(t, contract.MaintenanceSweepInput{ParallelPrepare: &off})
		require.False(t, starter.requests[0].ParallelPrepare)
	})
}

func demandOfKind(kind string) any {
	return mock.MatchedBy(func(p contract.ScanDemandParams) bool { return p.Kind == kind })
}

func TestMergeWalTickStartsTheRealMergeWal(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic:gs"})
	res := resultOf[contract.MergeWalTickResult](t, env)
	require.Equal(t, "merge-wal/generic/gs", res.WorkflowID)
	require.Equal(t, "run-generic:gs", res.RunID)
	require.Equal(t, []contract.StartRequest{{Workflow: contract.MergeWalWorkflow, Target: "generic:gs",
		Trigger: contract.TriggerSchedule, Reason: "per-target schedule"}}, starter.requests)
}

func TestMergeWalTickReportsStartFailure(t *testing.T) {
	env := newEnv(t)
	starter := &fakeStarter{fail: map[string]string{"generic:gs": "namespace not found"}}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.ExecuteWorkflow(MergeWalTick, contract.MergeWalTickInput{Target: "generic:gs"})
	typ, _ := appErrType(env.GetWorkflowError())
	require.Equal(t, contract.ErrTypeStartFailed, typ)
}
