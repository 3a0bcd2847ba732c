package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/workflows"
)

// The workflows driving the real activities over a real (in-memory) store: names, payload
// shapes and the merge protocol have to line up end to end.

func newWorkflowEnv(t *testing.T, a *Activities) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newTestWorkflowEnv()
	workflows.Register(env)
	Register(env, a)
	return env
}

func TestMergeWalEndToEnd(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(t *testing.T) {
			ctx := context.Background()
			url := memURL(t)
			w1 := openDB(t, url, "w1")
			w2 := openDB(t, url, "w2")
			seal(t, w1, "generic:gs", []string{"a", "b"}, []string{"b", "c"}, []string{"d"})
			seal(t, w2, "generic:gs", []string{"a"}, []string{"e"})
			two := 2

			env := newWorkflowEnv(t, &Activities{DB: w1, Client: newSignalRecorder()})
			env.ExecuteWorkflow(contract.MergeWalWorkflow, contract.MergeWalInput{
				Target: "generic:gs", MaxGenerations: &two, ParallelPrepare: parallel,
			})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res contract.MergeWalResult
			require.NoError(t, env.GetWorkflowResult(&res))

			require.Equal(t, 5, res.Reclaimed)
			require.Len(t, res.Shards, 2)
			for _, sr := range res.Shards {
				require.True(t, sr.Finished)
				require.Empty(t, sr.Error)
				require.Zero(t, sr.Pending)
			}
			reader := openDB(t, url, "reader")
			s, err := reader.Open(ctx, mustTarget(t, "generic:gs"))
			require.NoError(t, err)
			st, err := s.Stats(ctx)
			require.NoError(t, err)
			require.Zero(t, st.TotalPending())
			page, err := s.List(ctx, store.ListOptions{Source: "base", Limit: 100})
			require.NoError(t, err)
			require.Len(t, page.Rows, 5, "a..e, each once")
		})
	}
}

func TestMaintenanceSweepEndToEnd(t *testing.T) {
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:busy", []string{"a"}, []string{"b"}, []string{"c"})
	seal(t, db, "generic:quiet", []string{"a"})
	seal(t, db, "rollout:empty")
	c, got := fakeClient(nil)

	env := newWorkflowEnv(t, &Activities{DB: db, Client: c})
	env.ExecuteWorkflow(contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{MergeMinGenerations: 3})
	require.NoError(t, env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Len(t, res.Started, 1)
	require.Equal(t, "merge-wal/generic/busy", res.Started[0].WorkflowID)
	require.Len(t, *got, 1)
	require.Equal(t, "merge-wal/generic/busy", (*got)[0].ID)
	// The demand index lists only the two stores with sealed generations, and only the one
	// over the threshold is a candidate.
	require.Equal(t, 2, res.StoresWithDebt)
	require.Equal(t, 4, res.DemandRecords)
	require.Equal(t, 1, res.Qualified)
	require.Equal(t, 1, res.Scanned)
	require.Empty(t, res.Skipped)
}
