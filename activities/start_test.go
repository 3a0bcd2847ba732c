package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/contract"
)

// fakeClient answers ExecuteWorkflow with a run whose IDs echo the options, and lists no
// running workflow. The activity starts concurrently: the options are collected under a
// lock.
func fakeClient(fail map[string]error) (*mocks.Client, *[]client.StartWorkflowOptions) {
	c := &mocks.Client{}
	var mu sync.Mutex
	var got []client.StartWorkflowOptions
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
			mu.Lock()
			got = append(got, o)
			mu.Unlock()
			if err := fail[o.ID]; err != nil {
				return nil, err
			}
			return startedRun(o.ID, "run-"+o.ID), nil
		}).Maybe()
	// No merge is running (ScanDemand's visibility listing).
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(&workflowservice.ListWorkflowExecutionsResponse{}, nil).Maybe()
	return c, &got
}

func TestStartWorkflowsStartsThroughTheSharedHelpers(t *testing.T) {
	c, got := fakeClient(map[string]error{"merge-wal/generic/down": errors.New("unavailable")})
	env := newActivityEnv(t, &Activities{Client: c})

	res := mustRun[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:gs"},
		{Workflow: contract.CompactBaseWorkflow, Target: "rollout:r"},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:down"},
		{Workflow: "DropTable", Target: "generic:gs"},
		{Workflow: contract.MergeWalWorkflow, Target: "generic"},
	}})
	require.Len(t, res.Outcomes, 5)
	require.Equal(t, contract.StartOutcome{Workflow: "MergeWal", Target: "generic:gs", WorkflowID: "merge-wal/generic/gs", RunID: "run-merge-wal/generic/gs"}, res.Outcomes[0])
	require.Equal(t, "compact/rollout/r", res.Outcomes[1].WorkflowID)
	require.Empty(t, res.Outcomes[1].Error)
	require.Contains(t, res.Outcomes[2].Error, "unavailable")
	require.Contains(t, res.Outcomes[3].Error, "unknown workflow")
	require.Contains(t, res.Outcomes[4].Error, "invalid input")

	require.Len(t, *got, 3)
	for _, o := range *got {
		require.Equal(t, contract.TaskQueue, o.TaskQueue)
		require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, o.WorkflowIDConflictPolicy)
		require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
	}
}

// A batch whose every start failed fails StartFailed: non-retryably when no start can succeed
// on any retry (the server refuses the request or the namespace, or the request itself is
// invalid), retryably when one of them failed in a way a retry may pass.
func TestStartWorkflowsFailsForGoodWhenEveryStartFailedForGood(t *testing.T) {
	refused := map[string]error{
		"merge-wal/generic/bad":  serviceerror.NewInvalidArgument("WorkflowId length exceeds limit"),
		"merge-wal/generic/gone": serviceerror.NewNamespaceNotFound("walkeeper"),
		"compact/generic/denied": serviceerror.NewPermissionDenied("no", ""),
	}
	forGood := []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:bad"},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:gone"},
		{Workflow: contract.CompactBaseWorkflow, Target: "generic:denied"},
		{Workflow: "DropTable", Target: "generic:gs"},
		{Workflow: contract.MergeWalWorkflow, Target: "generic"},
	}
	for _, tc := range []struct {
		name         string
		busy         error
		nonRetryable bool
	}{
		{"all for good", nil, true},
		{"one unavailable", serviceerror.NewUnavailable("frontend restarting"), false},
		{"one busy", serviceerror.NewResourceExhausted(0, "rps limit"), false},
		{"one late", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail := map[string]error{"merge-wal/generic/busy": tc.busy}
			for id, err := range refused {
				fail[id] = err
			}
			starts := forGood
			if tc.busy != nil {
				starts = append(slices.Clone(forGood), contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: "generic:busy"})
			}
			c, _ := fakeClient(fail)
			env := newActivityEnv(t, &Activities{Client: c})
			_, err := run[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: starts})
			requireAppErr(t, err, contract.ErrTypeStartFailed, tc.nonRetryable)
		})
	}
}

// Through the sweep's retry policy: a start the server refuses is tried once, not once per
// attempt of the activity; an unavailable server is retried; a batch in which some starts
// succeeded is not run again, so nothing that started is started twice.
func TestStartWorkflowsRetriesOnlyWhatCanSucceed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		calls int
	}{
		{"refused", serviceerror.NewInvalidArgument("bad search attribute"), 1},
		{"unavailable", serviceerror.NewUnavailable("frontend restarting"), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := fakeClient(map[string]error{"merge-wal/generic/gs": tc.err})
			env := newWorkflowEnv(t, &Activities{Client: c})
			env.ExecuteWorkflow(contract.MergeWalTickWorkflow, contract.MergeWalTickInput{Target: "generic:gs"})
			require.True(t, env.IsWorkflowCompleted())
			requireAppErr(t, env.GetWorkflowError(), contract.ErrTypeStartFailed, tc.calls == 1)
			require.Len(t, *got, tc.calls)
		})
	}
	t.Run("partial", func(t *testing.T) {
		url := memURL(t)
		db := openDB(t, url, "w1")
		seal(t, db, "generic:up", []string{"a"}, []string{"b"}, []string{"c"})
		seal(t, db, "generic:down", []string{"a"}, []string{"b"}, []string{"c"})
		c, got := fakeClient(map[string]error{"merge-wal/generic/down": serviceerror.NewUnavailable("frontend restarting")})
		env := newWorkflowEnv(t, &Activities{DB: db, Client: c})
		env.ExecuteWorkflow(contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{MergeMinGenerations: 3})
		require.NoError(t, env.GetWorkflowError())
		var res contract.MaintenanceSweepResult
		require.NoError(t, env.GetWorkflowResult(&res))
		require.Len(t, res.Started, 1)
		require.Equal(t, "merge-wal/generic/up", res.Started[0].WorkflowID)
		require.Len(t, res.Skipped, 1)
		require.Len(t, *got, 2, "one start each: the batch is not run again")
	})
}

// A MergeWal start carries the sweep's parallel-prepare flag and urgency per target and its
// kind's configured fairness weight into MergeWal's input, and starts the run at the
// priority they make (contract.MergePriority).
func TestStartWorkflowsPassesParallelPrepareUrgencyAndFairnessWeight(t *testing.T) {
	c := &mocks.Client{}
	var mu sync.Mutex
	inputs := map[string]contract.MergeWalInput{}
	opts := map[string]client.StartWorkflowOptions{}
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
			in := args[0].(contract.MergeWalInput)
			mu.Lock()
			inputs[in.Target], opts[in.Target] = in, o
			mu.Unlock()
			return startedRun(o.ID, "run"), nil
		})
	env := newActivityEnv(t, &Activities{Client: c, FairnessWeights: contract.FairnessWeights{"rollout": 3}})
	mustRun[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:wide", ParallelPrepare: true},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:narrow"},
		{Workflow: contract.MergeWalWorkflow, Target: "rollout:deep", Urgent: true},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:light"},
	}})
	require.Len(t, inputs, 4)
	require.True(t, inputs["generic:wide"].ParallelPrepare)
	require.False(t, inputs["generic:narrow"].ParallelPrepare)
	require.True(t, inputs["rollout:deep"].Urgent)
	require.Equal(t, 3.0, inputs["rollout:deep"].FairnessWeight)
	require.Equal(t, contract.MergePriority("rollout", true, 3), opts["rollout:deep"].Priority)
	require.False(t, inputs["generic:light"].Urgent)
	require.Equal(t, contract.DefaultFairnessWeight, inputs["generic:light"].FairnessWeight)
	require.Equal(t, contract.MergePriority("generic", false, 1), opts["generic:light"].Priority)
}

// A batch's starts overlap (at most StartConcurrency at once, the default when unset) and
// their outcomes keep the request order.
func TestStartWorkflowsStartsConcurrentlyInOrder(t *testing.T) {
	for _, tc := range []struct {
		set, limit int
	}{{0, DefaultStartConcurrency}, {4, 4}, {48, 48}} {
		t.Run(fmt.Sprint(tc.set), func(t *testing.T) {
			c := &mocks.Client{}
			var inFlight, peak atomic.Int64
			c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
				func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(20 * time.Millisecond) // a frontend round trip
					inFlight.Add(-1)
					return startedRun(o.ID, "run-"+o.ID), nil
				})
			env := newActivityEnv(t, &Activities{Client: c, StartConcurrency: tc.set})
			var starts []contract.StartRequest
			for i := 0; i < 4*tc.limit; i++ {
				starts = append(starts, contract.StartRequest{Workflow: contract.MergeWalWorkflow, Target: fmt.Sprintf("generic:s%03d", i)})
			}
			res := mustRun[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: starts})
			require.Len(t, res.Outcomes, len(starts))
			for i, o := range res.Outcomes {
				require.Equal(t, starts[i].Target, o.Target)
				require.Equal(t, fmt.Sprintf("merge-wal/generic/s%03d", i), o.WorkflowID)
				require.Empty(t, o.Error)
			}
			require.Greater(t, peak.Load(), int64(1), "starts of one batch ran one after another")
			require.LessOrEqual(t, peak.Load(), int64(tc.limit))
		})
	}
}

// A failed start's error is cut to contract.MaxStartErrorBytes in its outcome, on a rune
// boundary, so a batch's result stays bounded however long the server's messages are.
func TestStartWorkflowsBoundsOutcomeErrors(t *testing.T) {
	long := errors.New("frontend: " + strings.Repeat("é", 200))
	c, _ := fakeClient(map[string]error{"merge-wal/generic/down": long})
	env := newActivityEnv(t, &Activities{Client: c})
	res := mustRun[contract.StartWorkflowsResult](t, env, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{Starts: []contract.StartRequest{
		{Workflow: contract.MergeWalWorkflow, Target: "generic:up"},
		{Workflow: contract.MergeWalWorkflow, Target: "generic:down"},
	}})
	msg := res.Outcomes[1].Error
	require.LessOrEqual(t, len(msg), contract.MaxStartErrorBytes)
	require.True(t, utf8.ValidString(msg), "cut on a rune boundary")
	require.True(t, strings.HasPrefix(msg, "frontend: é"))
	require.True(t, strings.HasSuffix(msg, "…"))
}

// A StartWorkflows task lost in delivery is noticed by its heartbeat timeout, so the activity
// heartbeats while its starts wait on a busy frontend: without it, a batch slower than that
// timeout would time out while it works.
func TestStartWorkflowsHeartbeatsWhileStartsWait(t *testing.T) {
	beats := 0
	runUnderHeartbeatTimeout(t, func(firstBeat func()) any {
		c := &mocks.Client{}
		c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
			func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
				firstBeat()
				return startedRun(o.ID, "run-"+o.ID), nil
			})
		return (&Activities{Client: c}).StartWorkflows
	}, func(converter.EncodedValues) { beats++ }, contract.StartWorkflowsParams{
		Starts: []contract.StartRequest{{Workflow: contract.MergeWalWorkflow, Target: "generic:slow"}}})
	require.Positive(t, beats, "no heartbeat while the start waited")
}

// startedRun is the run a mocked ExecuteWorkflow returns for a start of workflow id.
func startedRun(id, runID string) client.WorkflowRun {
	run := &mocks.WorkflowRun{}
	run.On("GetID").Return(id)
	run.On("GetRunID").Return(runID)
	return run
}
