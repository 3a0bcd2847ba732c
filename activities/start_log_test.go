package activities

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/contract"
)

// A batch whose starts fail logs a few of them and one line that counts them all: a sweep
// that Temporal throttles fails thousands of starts a round, and each was a warn line of its
// own, on every attempt of every batch.
func TestStartWorkflowsLogsABoundedNumberOfFailures(t *testing.T) {
	const n = 100
	fail := map[string]error{}
	var starts []contract.StartRequest
	for i := range n {
		target := fmt.Sprintf("generic:s%d", i)
		fail[fmt.Sprintf("merge-wal/generic/s%d", i)] = errors.New("rps limit")
		starts = append(starts, contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: target})
	}
	starts = append(starts, contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: "generic:ok"})
	c, _ := fakeClient(fail)
	core, logs := observer.New(zapcore.InfoLevel)
	env := newActivityEnv(t, &Activities{Client: c, Logger: zap.New(core)})
	res := mustRun[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: starts})
	require.Len(t, res.Outcomes, n+1)

	one := logs.FilterMessage("workflow start failed").Len()
	require.LessOrEqual(t, one, maxStartFailuresLogged, "failed starts logged one by one")
	require.GreaterOrEqual(t, one, 1)
	all := logs.FilterMessage("workflow starts failed").All()
	require.Len(t, all, 1)
	require.EqualValues(t, n, all[0].ContextMap()["failed"])
	require.EqualValues(t, n+1, all[0].ContextMap()["starts"])
}
