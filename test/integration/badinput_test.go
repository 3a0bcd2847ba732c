package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// A workflow started with a bad target fails fast with a clear non-retryable error, however
// it was started (here: a bare client start with a JSON map, as the Temporal CLI would send);
// a MergeWal of a well-formed target naming no store fails fast too, once, with one line that
// says how to create the store.
func TestBadTargetFailsFast(t *testing.T) {
	e := newEnv(t)
	e.startWorker(e.config("bad-input"))

	cases := []struct {
		workflow string
		input    map[string]any
		errType  string
	}{
		{contract.MergeWalWorkflow, map[string]any{"target": "nope:x"}, contract.ErrTypeInvalidInput},
		{contract.MergeWalWorkflow, map[string]any{"target": "generic:"}, contract.ErrTypeInvalidInput},
		{contract.MergeWalWorkflow, map[string]any{"target": "generic:a/b"}, contract.ErrTypeInvalidInput},
		{contract.MergeWalWorkflow, map[string]any{}, contract.ErrTypeInvalidInput},
		{contract.MergeWalWorkflow, map[string]any{"target": "generic:x", "max_passes": -1}, contract.ErrTypeInvalidInput},
		{contract.CompactBaseWorkflow, map[string]any{"target": "nope:x"}, contract.ErrTypeInvalidInput},
		{contract.MergeWalTickWorkflow, map[string]any{"target": "generic"}, contract.ErrTypeInvalidInput},
		{contract.MergeWalWorkflow, map[string]any{"target": "generic:missing"}, contract.ErrTypeStoreNotFound},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d", tc.workflow, i), func(t *testing.T) {
			start := time.Now()
			run, err := e.c.ExecuteWorkflow(e.ctx(waitShort), client.StartWorkflowOptions{
				ID:        fmt.Sprintf("bad-input/%d", i),
				TaskQueue: contract.TaskQueue,
			}, tc.workflow, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			err = run.Get(e.ctx(waitLong), nil)
			took := time.Since(start)
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("%s %v: error %v, want an application error", tc.workflow, tc.input, err)
			}
			if appErr.Type() != tc.errType || !appErr.NonRetryable() {
				t.Fatalf("%s %v: error type %q non-retryable %v (%v), want non-retryable %s",
					tc.workflow, tc.input, appErr.Type(), appErr.NonRetryable(), err, tc.errType)
			}
			// "Fast": one workflow task (and one activity for the missing store), no retries.
			// The bound is loose: on this dev server a new worker occasionally loses the first
			// task it polls to the 10 s workflow-task timeout (a bare SDK worker does too).
			if took > 45*time.Second {
				t.Errorf("%s %v failed only after %s", tc.workflow, tc.input, took)
			}
			if took > 5*time.Second {
				e.logHistory(run.GetID(), run.GetRunID())
			}
			t.Logf("%s %v: failed in %s: %v", tc.workflow, tc.input, took.Round(time.Millisecond), err)
			if tc.errType == contract.ErrTypeStoreNotFound {
				e.requireMissingStoreFailedOnce(t, run, tc.input["target"].(string))
			}
		})
	}
}

// requireMissingStoreFailedOnce checks that run, a MergeWal of target (no such store), failed
// non-retryably with the one line of contract.MissingStoreMessage, after one listing.
func (e *env) requireMissingStoreFailedOnce(t *testing.T, run client.WorkflowRun, target string) {
	t.Helper()
	d, err := e.describe(run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Fatalf("status %v, want failed", st)
	}
	f := e.closeEvent(t, run.GetID(), run.GetRunID()).GetWorkflowExecutionFailedEventAttributes().GetFailure()
	if line := contract.MissingStoreMessage(mustTarget(t, target), ""); f.GetMessage() != line || f.GetCause() != nil {
		t.Fatalf("failure %q (cause %v), want %q and no cause", f.GetMessage(), f.GetCause(), line)
	}
	// The listing is a local activity (merge-wal-local-list): one marker, one attempt.
	c := actioncount.Events(e.history(t, run.GetID(), run.GetRunID()))
	if c.Activities != 0 || c.LocalActivities != 1 || c.LocalAttempts != 1 {
		t.Errorf("%d activity attempts, %d local-activity markers of %d attempts; want the one listing, not retried",
			c.Activities, c.LocalActivities, c.LocalAttempts)
	}
}
