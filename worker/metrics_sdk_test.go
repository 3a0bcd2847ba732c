package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// A workflow's refused signals, added through the SDK's workflow metrics handler, reach the
// worker's Prometheus registry as walkeeper_workflow_refused_signals_total: the worker's
// Temporal client gets SDKMetrics, which keeps that counter (with bounded labels) and drops
// the SDK's own metrics.
func TestRefusedSignalsReachTheWorkersRegistry(t *testing.T) {
	opts, err := DefaultConfig().Temporal.ClientOptions(nil)
	require.NoError(t, err)
	require.Equal(t, SDKMetrics, opts.MetricsHandler, "the worker's Temporal client exports the workflows' counters")

	m := NewMetrics(nil)
	value := func(wf string) float64 {
		return testutil.ToFloat64(refusedSignals.WithLabelValues(wf, contract.ActivityStateSignal))
	}
	before, otherBefore := value(contract.MergeWalWorkflow), value("other")
	series := testutil.CollectAndCount(m.Registry)

	// What workflows/tracker.go does on each refused signal (n of them), under a workflow name;
	// the SDK's own metrics go through the same handler.
	run := func(name string, n int64) {
		countInWorkflow(t, name, func(h client.MetricsHandler) {
			h = h.WithTags(map[string]string{contract.MetricTagSignal: contract.ActivityStateSignal})
			h.Counter(contract.MetricRefusedSignals).Inc(n)
			h.Counter("temporal_some_sdk_metric").Inc(1)
		})
	}
	run(contract.MergeWalWorkflow, 2)
	run("NotAWalkeeperWorkflow", 1)

	require.Equal(t, before+2, value(contract.MergeWalWorkflow))
	require.Equal(t, otherBefore+1, value("other"), "an unknown workflow type is no label value of its own")
	require.LessOrEqual(t, testutil.CollectAndCount(m.Registry), series+1, "the SDK's own metrics are not exported")
}

// A run's ignored input members, added through the SDK's workflow metrics handler, reach the
// worker's registry as walkeeper_workflow_ignored_input_fields_total, by workflow type among
// walkeeper's own, else "other".
func TestIgnoredInputFieldsReachTheWorkersRegistry(t *testing.T) {
	m := NewMetrics(nil)
	value := func(wf string) float64 { return testutil.ToFloat64(ignoredInputFields.WithLabelValues(wf)) }
	before, otherBefore := value(contract.SweepWindowWorkflow), value("other")
	require.GreaterOrEqual(t, testutil.CollectAndCount(m.Registry, "walkeeper_workflow_ignored_input_fields_total"), len(workflowTypes),
		"every workflow type's series is there from the start")

	// What workflows/input_ignored.go does on an input with n ignored members.
	run := func(name string, n int64) {
		countInWorkflow(t, name, func(h client.MetricsHandler) { h.Counter(contract.MetricIgnoredInputFields).Inc(n) })
	}
	run(contract.SweepWindowWorkflow, 2)
	run("NotAWalkeeperWorkflow", 1)

	require.Equal(t, before+2, value(contract.SweepWindowWorkflow))
	require.Equal(t, otherBefore+1, value("other"), "an unknown workflow type is no label value of its own")
}

// countInWorkflow runs, in a test workflow named name whose client has SDKMetrics, count on
// the run's metrics handler tagged with its workflow type, as walkeeper's workflows tag it.
func countInWorkflow(t *testing.T, name string, count func(client.MetricsHandler)) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(SDKMetrics)
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		count(workflow.GetMetricsHandler(ctx).WithTags(map[string]string{contract.MetricTagWorkflow: workflow.GetInfo(ctx).WorkflowType.Name}))
		return nil
	}, workflow.RegisterOptions{Name: name})
	env.ExecuteWorkflow(name)
	require.NoError(t, env.GetWorkflowError())
}
