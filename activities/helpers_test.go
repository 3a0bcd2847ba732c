package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

var testSchema = store.Schema{Fields: []store.Field{
	{Name: "id", Type: "string"},
	{Name: "n", Type: "int64", Nullable: true},
}}

var urlSeq atomic.Int64

func memURL(t *testing.T) string {
	return fmt.Sprintf("mem://activities-%s-%d", strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()), urlSeq.Add(1))
}

// openDB opens a DB for one writer instance on url, its options changed by tweak.
func openDB(t *testing.T, url, instance string, tweak ...func(*store.Options)) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.InstanceID = instance
	for _, f := range tweak {
		f(&opts)
	}
	db, err := store.OpenDB(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

func mustTarget(t *testing.T, s string) store.Target {
	t.Helper()
	tg, err := store.ParseTarget(s)
	require.NoError(t, err)
	return tg
}

// seal appends one generation per entry of gens (rows keyed id-<k> with n = generation
// index) to the store, creating it on first use, and seals each.
func seal(t *testing.T, db *store.DB, target string, gens ...[]string) *store.Store {
	t.Helper()
	ctx := context.Background()
	tg := mustTarget(t, target)
	s, err := db.Open(ctx, tg)
	if errors.Is(err, store.ErrNotFound) {
		co := store.CreateOptions{}
		if tg.Kind == store.KindGeneric {
			co.Schema = &testSchema
		}
		s, err = db.Create(ctx, tg, co)
	}
	require.NoError(t, err)
	for i, keys := range gens {
		rows := make([]store.Row, len(keys))
		for j, k := range keys {
			rows[j] = store.Row{Key: k, Values: []any{k, int64(i)}}
		}
		_, err := s.Append(ctx, rows)
		require.NoError(t, err)
		res, err := s.Flush(ctx)
		require.NoError(t, err)
		require.True(t, res.Sealed)
	}
	return s
}

// newTestWorkflowEnv is a workflow test environment with a deadlock timeout loose enough for
// loaded CI machines.
func newTestWorkflowEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

// newActivityEnv runs a's activities, under their production names, inside a test workflow,
// as a worker does.
func newActivityEnv(t *testing.T, a *Activities) *testsuite.TestActivityEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetExecuteActivitiesInWorkflow(true)
	Register(env, a)
	return env
}

func run[T any](t *testing.T, env *testsuite.TestActivityEnvironment, name string, arg any) (T, error) {
	t.Helper()
	var out T
	v, err := env.ExecuteActivity(name, arg)
	if err != nil {
		return out, err
	}
	require.NoError(t, v.Get(&out))
	return out, nil
}

// commitOne commits p alone in a CommitRound and returns its shard's part of the round.
func commitOne(t *testing.T, env *testsuite.TestActivityEnvironment, p contract.PreparedMerge) contract.RoundShardResult {
	t.Helper()
	res := mustRun[contract.CommitRoundResult](t, env, contract.CommitRoundActivity,
		contract.CommitRoundParams{Target: p.Target, Prepared: []contract.PreparedMerge{p}})
	require.Len(t, res.Shards, 1)
	return res.Shards[0]
}

func mustRun[T any](t *testing.T, env *testsuite.TestActivityEnvironment, name string, arg any) T {
	t.Helper()
	out, err := run[T](t, env, name, arg)
	require.NoError(t, err)
	return out
}

// requireAppErr requires err to be an application error of type typ and retryability, and
// returns it.
func requireAppErr(t *testing.T, err error, typ string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want application error %s, got %v", typ, err)
	require.Equal(t, typ, appErr.Type(), "%v", err)
	require.Equal(t, nonRetryable, appErr.NonRetryable(), "%v", err)
	return appErr
}

// runUnderHeartbeatTimeout runs the activity activityOf returns, with args, in a workflow whose
// activity heartbeat timeout is 600ms, and calls onBeat with each heartbeat's details (under a
// lock of its own). firstBeat, for the activity, returns at the first heartbeat: its loop
// ticks a third of the timeout in, and none within the timeout fails the run.
func runUnderHeartbeatTimeout(t *testing.T, activityOf func(firstBeat func()) any, onBeat func(converter.EncodedValues), args ...any) {
	t.Helper()
	var mu sync.Mutex
	first, once := make(chan struct{}), sync.Once{}
	env := newTestWorkflowEnv()
	env.RegisterActivityWithOptions(activityOf(func() {
		select {
		case <-first:
		case <-time.After(30 * time.Second):
		}
	}), activity.RegisterOptions{Name: "probe"})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		mu.Lock()
		onBeat(details)
		mu.Unlock()
		once.Do(func() { close(first) })
	})
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 600 * time.Millisecond})
		return workflow.ExecuteActivity(ctx, "probe", args...).Get(ctx, nil)
	})
	require.NoError(t, env.GetWorkflowError())
	mu.Lock() // orders every onBeat call before the caller reads what they recorded
	mu.Unlock()
}
