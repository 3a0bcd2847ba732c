package activities

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/panictest"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

func TestMain(m *testing.M) { panictest.Main(m, store.RecoveredPanics) }

// ReconcilePage reconciles stores in goroutines of its own, where the SDK's recovery of an
// activity's panic does not reach: a panic in one (here the storage driver's) ended the
// process. Now that store is one the page could not read, with an Internal error, and the
// panic is counted.
func TestFindingAPanicInAReconcileGoroutineIsAnUnreadableStore(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	seal(t, openDB(t, url, "w1"), "generic:a", []string{"k"})
	raw, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var armed atomic.Bool
	armed.Store(true)
	b := raw.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if !strings.HasPrefix(key, "_registry/") && armed.CompareAndSwap(true, false) {
			panictest.Injected()
			panic("injected: a storage driver panicked on " + key)
		}
		return nil
	}})
	opts := store.DefaultOptions()
	opts.InstanceID = "w2"
	db := store.OpenDBOnBucket(b, opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	before := store.RecoveredPanics()
	res := mustRun[contract.ReconcilePageResult](t, newActivityEnv(t, &Activities{DB: db}), contract.ReconcilePageActivity,
		contract.ReconcilePageParams{Kind: "generic", Limit: 10})
	require.False(t, armed.Load(), "the fault was reached")
	require.Equal(t, 1, res.Counts.Unreadable, "%+v", res)
	require.Equal(t, contract.ErrTypeInternal, res.Problems[0].ErrorType)
	require.Contains(t, res.Problems[0].Error, "injected")
	require.Equal(t, before+1, store.RecoveredPanics())
}

// StartWorkflows starts each workflow in a goroutine of its own: a panic of one start (here
// the Temporal client's) ended the process. Now that start's outcome is an Internal failure
// and the others start.
func TestFindingAPanicInAStartGoroutineFailsThatStart(t *testing.T) {
	c := &mocks.Client{}
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
			if o.ID == "merge-wal/generic/boom" {
				panictest.Injected()
				panic("injected: the client panicked")
			}
			return startedRun(o.ID, "run-"+o.ID), nil
		})
	before := store.RecoveredPanics()
	res := mustRun[contract.StartWorkflowsResult](t, newActivityEnv(t, &Activities{Client: c}), contract.StartWorkflowsActivity,
		contract.StartWorkflowsParams{Starts: []contract.StartRequest{
			{Workflow: contract.MergeWalWorkflow, Target: "generic:boom"},
			{Workflow: contract.MergeWalWorkflow, Target: "generic:fine"},
		}})
	require.Len(t, res.Outcomes, 2)
	require.Contains(t, res.Outcomes[0].Error, "injected: the client panicked")
	require.Equal(t, "merge-wal/generic/fine", res.Outcomes[1].WorkflowID)
	require.Empty(t, res.Outcomes[1].Error)
	require.Equal(t, before+1, store.RecoveredPanics())
}
