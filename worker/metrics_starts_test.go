package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
)

// A sweep's start that fails is listed as a skip and planned again next round while the
// activity succeeds: each start a sweep makes through StartWorkflows is counted in
// walkeeper_trigger_starts_total by its trigger, so WalkeeperMergeTriggersFailing sees one
// that never succeeds, and a trigger outside contract.Triggers counts as unknown.
func TestSweepStartsAreCountedByTrigger(t *testing.T) {
	c := &mocks.Client{}
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
			if o.ID == "merge-wal/generic/down" {
				return nil, errors.New("unavailable")
			}
			run := &mocks.WorkflowRun{}
			run.On("GetID").Return(o.ID)
			run.On("GetRunID").Return("run-" + o.ID)
			return run, nil
		})
	m := NewMetrics(nil)
	if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(contract.TriggerSweepAge, ResultFailed)); got != 0 {
		t.Fatalf("trigger_starts_total{sweep-age,failed} = %v before any start", got)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	activities.Register(env, &activities.Activities{Client: c, Metrics: m})
	_, err := env.ExecuteActivity(contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:down", Trigger: contract.TriggerSweepAge},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:up", Trigger: contract.TriggerSweepAge},
		{Workflow: contract.CompactBaseWorkflow, Target: "generic:up", Trigger: contract.TriggerSweepRuns},
		{Workflow: contract.MergeWalWorkflow, Target: "rollout:r", Trigger: "no-such-trigger"},
	}})
	if err != nil {
		t.Fatalf("StartWorkflows with one of four starts failing: %v", err)
	}
	for _, tc := range []struct {
		trigger, result string
		want            float64
	}{
		{contract.TriggerSweepAge, ResultFailed, 1},
		{contract.TriggerSweepAge, ResultStarted, 1},
		{contract.TriggerSweepRuns, ResultStarted, 1},
		{contract.TriggerSweepRuns, ResultFailed, 0},
		{contract.TriggerUnknown, ResultFailed, 1}, // the input check refuses the trigger
	} {
		if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(tc.trigger, tc.result)); got != tc.want {
			t.Errorf("trigger_starts_total{%s,%s} = %v, want %v", tc.trigger, tc.result, got, tc.want)
		}
	}
	// The worker's three triggers and the sweep's four, started and failed, and the unknown one.
	if n := testutil.CollectAndCount(m.triggerStarts); n != 7*2+1 {
		t.Errorf("%d trigger_starts_total series, want 15: a trigger outside contract.Triggers got its own", n)
	}
}
