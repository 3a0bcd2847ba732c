package hostile

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// Bounds of a refused workflow run.
const (
	// refusalWithin: a bad input fails the run in its first workflow task. The bound leaves
	// room for the dev server occasionally handing a new worker's first task out only after
	// its 10 s task timeout.
	refusalWithin = 30 * time.Second
	// refusalEvents: started, one workflow task (scheduled, started, completed), failed,
	// and a few to spare; a run that looped or retried has many more.
	refusalEvents = 12
)

// Workflow inputs come from anyone who can start a workflow (the Temporal CLI, the Web UI),
// not only from walkeeper's own triggers. A field out of its bounds (a sweep interval of
// 1 ns that would loop, a sweep concurrency of 100,000) or a forged continue-as-new carry
// fails the run at once with a non-retryable ApplicationError of type InvalidInput whose
// message names the field, and the history stays a handful of events.
func TestBadWorkflowInputsFailFast(t *testing.T) {
	w := startWorker(t, defaultConfig())
	c := w.temporalClient(t)
	w.createGeneric(t, "carry", []field{idField}, nil)

	cases := []struct {
		name, workflow, input, field string
	}{
		{"sweep window interval 1ns", contract.SweepWindowWorkflow, `{"interval":1}`, "interval"},
		{"sweep concurrency 100000", contract.MaintenanceSweepWorkflow, `{"concurrency":100000}`, "concurrency"},
		{"merge max passes as text", contract.MergeWalWorkflow, `{"target":"generic:carry","max_passes":"5"}`, "max_passes"},
		{"merge with a forged carry", contract.MergeWalWorkflow,
			`{"target":"generic:carry","carry":{"runs":-3,"pending_at_start":-1,"shards":[{"shard":"../../not-a-shard","reclaimed":-5,"passes":-1,"pending":-2}]}}`,
			"carry"},
	}
	before := w.listing(t)
	// The group returns once its parallel cases are done.
	t.Run("inputs", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				id := fmt.Sprintf("hostile-input-%d", i)
				start := time.Now()
				cmd := exec.Command(suite.CLIPath(), "workflow", "start", "--address", suite.HostPort(), "--namespace", w.ns,
					"--task-queue", contract.TaskQueue, "--type", tc.workflow, "--workflow-id", id, "--input", tc.input)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("temporal workflow start: %v\n%s", err, out)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_ = c.TerminateWorkflow(ctx, id, "", "hostile test over") // a run that did not fail must not keep looping
				})

				ctx, cancel := context.WithDeadline(context.Background(), start.Add(refusalWithin))
				defer cancel()
				err := c.GetWorkflow(ctx, id, "").Get(ctx, nil)
				took := time.Since(start)
				var appErr *temporal.ApplicationError
				switch {
				case err == nil:
					t.Errorf("%s %s completed (after %s) instead of failing", tc.workflow, tc.input, took.Round(time.Millisecond))
				case ctx.Err() != nil:
					t.Errorf("%s %s has not failed %s after its start (%v)", tc.workflow, tc.input, refusalWithin, err)
				case !errors.As(err, &appErr):
					t.Errorf("%s %s failed with %v, want an ApplicationError", tc.workflow, tc.input, err)
				default:
					want := "invalid input: " + tc.field
					if appErr.Type() != contract.ErrTypeInvalidInput || !appErr.NonRetryable() || !strings.HasPrefix(appErr.Message(), want) {
						t.Errorf("%s %s failed with type %q, non-retryable %v, message %q; want a non-retryable %s starting %q",
							tc.workflow, tc.input, appErr.Type(), appErr.NonRetryable(), appErr.Message(), contract.ErrTypeInvalidInput, want)
					} else {
						t.Logf("failed after %s: %s", took.Round(time.Millisecond), appErr.Message())
					}
				}

				dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
				defer dcancel()
				d, err := c.DescribeWorkflowExecution(dctx, id, "")
				if err != nil {
					t.Fatal(err)
				}
				info := d.GetWorkflowExecutionInfo()
				if n := info.GetHistoryLength(); n > refusalEvents {
					t.Errorf("the run's history has %d events (status %s), want at most %d", n, info.GetStatus(), refusalEvents)
				}
				if s := info.GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
					t.Errorf("the run's status is %s, want FAILED", s)
				}
			})
		}
	})
	w.checkNothingWritten(t, before, "the refused workflow runs")
}
