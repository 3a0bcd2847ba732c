package workflows

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/contract"
)

// A start whose input has a member no field takes, as a person types `max_pases` for
// `max_passes`, still runs with the defaults (a worker of an earlier build must run what a
// later starter wrote), but the run names the member: a warning in the worker's log, the
// counter the worker exports, the status query and the current details, which each refresh
// keeps. Before, nothing said the knob had not taken.
func TestAnInputMemberNoFieldTakesIsNamedWhereTheStarterLooks(t *testing.T) {
	metrics := newCountingMetrics()
	var logged bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(metrics)
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	env := newSuiteEnv(&s)
	mockTable(env, newFakeTable("generic:gs", 8, map[string]int{"a": 3}))

	env.ExecuteWorkflow(contract.MergeWalWorkflow, rawPayload("json/plain",
		`{"target":"generic:gs","max_pases":3,"carry_":{},"Max_Passes":0,"parallel_prepare":true}`))
	res := mergeResult(t, env)
	require.Equal(t, 3, res.Reclaimed, "the run goes on with what it could decode")

	require.Equal(t, []string{"max_pases", "carry_"}, queryStatus(t, env).IgnoredFields)
	details := currentDetails(t, env)
	require.True(t, strings.HasPrefix(details, `**input fields ignored** (no such field): "max_pases", "carry_"`+"\n\n**generic:gs** done"), details)
	require.Contains(t, logged.String(), `msg="Input fields ignored: this workflow's input has no such field, so the run goes on without them." fields="[max_pases carry_]" count=2`)
	metrics.requireCount(t, contract.MetricIgnoredInputFields, "", contract.MergeWalWorkflow, 2)
}

// Every workflow names them, nested members with their path, the compaction in its status
// too; an input without them sets no details of its own and counts nothing.
func TestEveryWorkflowNamesTheInputMembersItIgnores(t *testing.T) {
	for _, c := range []struct{ workflow, input, name string }{
		{contract.CompactBaseWorkflow, `{"target":"generic:gs","max_passes":1,"max_runz":4}`, "max_runz"},
		{contract.MaintenanceSweepWorkflow, `{"start_batchh":2}`, "start_batchh"},
		{contract.SweepWindowWorkflow, `{"sweep":{"start_batchh":2},"window":60000000000,"interval":20000000000}`, "sweep.start_batchh"},
		{contract.MergeWalTickWorkflow, `{"target":"generic:gs","urgent":true}`, "urgent"},
		{contract.ReconcileDemandWorkflow, `{"page_size":10,"cursor":{"kind_indx":1}}`, "cursor.kind_indx"},
	} {
		t.Run(c.workflow, func(t *testing.T) {
			metrics := newCountingMetrics()
			env := newEnvWithMetrics(t, metrics)
			env.ExecuteWorkflow(c.workflow, rawPayload("json/plain", c.input))
			require.True(t, env.IsWorkflowCompleted())
			require.NotEqual(t, contract.ErrTypeInvalidInput, errorType(env.GetWorkflowError()))
			require.Contains(t, currentDetails(t, env), `**input fields ignored** (no such field): "`+c.name+`"`)
			metrics.requireCount(t, contract.MetricIgnoredInputFields, "", c.workflow, 1)
			if c.workflow == contract.CompactBaseWorkflow {
				require.Equal(t, []string{c.name}, queryAs[contract.CompactBaseStatus](t, env).IgnoredFields)
			}
		})
	}

	metrics := newCountingMetrics()
	env := newEnvWithMetrics(t, metrics)
	env.ExecuteWorkflow(contract.MaintenanceSweepWorkflow, rawPayload("json/plain", `{"start_batch":2}`))
	require.True(t, env.IsWorkflowCompleted())
	require.NotContains(t, currentDetails(t, env), "ignored")
	require.Empty(t, metrics.counts)
}
