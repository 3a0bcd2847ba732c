package hostile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
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
				w.startRefused(t, c, fmt.Sprintf("hostile-input-%d", i), tc.workflow, []string{"--input", tc.input},
					tc.workflow+" "+tc.input, "invalid input: "+tc.field)
			})
		}
	})
	w.checkNothingWritten(t, before, "the refused workflow runs")
}

// startRefused starts workflow under id with the Temporal CLI (args: its input flags) and
// requires its run refused as requireRefusedRun does; what names the start in messages.
func (w *worker) startRefused(t *testing.T, c client.Client, id, workflow string, args []string, what, want string) {
	t.Helper()
	start := time.Now()
	args = append([]string{"workflow", "start", "--address", suite.HostPort(), "--namespace", w.ns,
		"--task-queue", contract.TaskQueue, "--type", workflow, "--workflow-id", id}, args...)
	if out, err := exec.Command(suite.CLIPath(), args...).CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow start: %v\n%s", err, out)
	}
	terminateAtEnd(t, c, id)
	requireRefusedRun(t, c, id, start, what, want)
}

// terminateAtEnd terminates the workflow id once t ends: a run that did not fail must not
// keep looping.
func terminateAtEnd(t *testing.T, c client.Client, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.TerminateWorkflow(ctx, id, "", "hostile test over")
	})
}

// requireRefusedRun waits for the run of id, started at start, to close and checks that it
// failed within refusalWithin with a non-retryable InvalidInput whose message starts with
// want, in a handful of events, and that the workflow ID's latest run is that first attempt
// (no retry took the ID). what names the start in messages.
func requireRefusedRun(t *testing.T, c client.Client, id string, start time.Time, what, want string) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(refusalWithin))
	defer cancel()
	err := c.GetWorkflow(ctx, id, "").Get(ctx, nil)
	took := time.Since(start)
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		t.Errorf("%s completed (after %s) instead of failing", what, took.Round(time.Millisecond))
	case ctx.Err() != nil:
		t.Errorf("%s has not failed %s after its start (%v)", what, refusalWithin, err)
	case !errors.As(err, &appErr):
		t.Errorf("%s failed with %v, want an ApplicationError", what, err)
	case appErr.Type() != contract.ErrTypeInvalidInput || !appErr.NonRetryable() || !strings.HasPrefix(appErr.Message(), want):
		t.Errorf("%s failed with type %q, non-retryable %v, message %q; want a non-retryable %s starting %q",
			what, appErr.Type(), appErr.NonRetryable(), appErr.Message(), contract.ErrTypeInvalidInput, want)
	default:
		t.Logf("failed after %s: %s", took.Round(time.Millisecond), appErr.Message())
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
	it := c.GetWorkflowHistory(dctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	if a := ev.GetWorkflowExecutionStartedEventAttributes().GetAttempt(); a != 1 {
		t.Errorf("the workflow ID's latest run is attempt %d: the refusal was retried", a)
	}
}

// A payload that is not one JSON object, written the way an operator can (temporal workflow
// start with an encoding binary/plain or json/protobuf, the input null, a second input), or through
// the SDK (`json/plain` bytes that do not parse, under the store's own merge ID with a retry
// policy), fails the run once with a non-retryable InvalidInput naming the input. The SDK's
// retryable decode error made the start with a retry policy run again every second, holding
// the store's merge ID, for as long as the policy allowed (for ever by default). A signal
// payload that is not JSON is refused and counted by the run, which completes.
func TestNonJSONWorkflowPayloadsFailOnce(t *testing.T) {
	w := startWorker(t, defaultConfig())
	c := w.temporalClient(t)
	w.createGeneric(t, "payload", []field{idField}, nil)

	valid := map[string]string{
		contract.MergeWalWorkflow:         `{"target":"generic:payload"}`,
		contract.CompactBaseWorkflow:      `{"target":"generic:payload"}`,
		contract.MergeWalTickWorkflow:     `{"target":"generic:payload"}`,
		contract.MaintenanceSweepWorkflow: `{}`,
		contract.SweepWindowWorkflow:      `{}`,
		contract.ReconcileDemandWorkflow:  `{}`,
	}
	type cliCase struct {
		name, workflow string
		args           []string
		problem        string
	}
	var cases []cliCase
	for _, wf := range slices.Sorted(maps.Keys(valid)) {
		cases = append(cases, cliCase{wf + " binary/plain", wf, []string{"--input-meta", "encoding=binary/plain", "--input", `"x"`},
			`encoding "binary/plain" where json/plain is expected`})
	}
	mw := contract.MergeWalWorkflow
	cases = append(cases,
		cliCase{"MergeWal json/protobuf", mw, []string{"--input-meta", "encoding=json/protobuf", "--input", valid[mw]},
			`encoding "json/protobuf" where json/plain is expected`},
		cliCase{"SweepWindow null", contract.SweepWindowWorkflow, []string{"--input", "null"}, "null where an object is expected"},
		cliCase{"MergeWal two inputs", mw, []string{"--input", valid[mw], "--input", valid[mw]}, "more than one argument"},
	)
	before := w.listing(t)
	t.Run("payloads", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				w.startRefused(t, c, fmt.Sprintf("hostile-payload-%d", i), tc.workflow, tc.args, tc.name, "invalid input: input: "+tc.problem)
			})
		}
		t.Run("not JSON under the merge ID with a retry policy", func(t *testing.T) {
			t.Parallel()
			tg, err := target.ParseTarget("generic:payload")
			if err != nil {
				t.Fatal(err)
			}
			id := contract.MergeWalID(tg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			bad := converter.NewRawValue(&commonpb.Payload{
				Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
				Data:     []byte(`{"target":"generic:payload"`)})
			if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: contract.TaskQueue,
				RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1}}, mw, bad); err != nil {
				t.Fatal(err)
			}
			terminateAtEnd(t, c, id)
			requireRefusedRun(t, c, id, start, "MergeWal with json/plain bytes that are not JSON", "invalid input: input: not JSON: ")
		})
	})
	w.checkNothingWritten(t, before, "the refused workflow runs")

	// An activity-state signal that is not JSON, sent with the merge's start, is refused and
	// counted, and the merge completes.
	ctx, cancel := context.WithTimeout(context.Background(), refusalWithin)
	defer cancel()
	id := "hostile-payload-signal"
	run, err := c.SignalWithStartWorkflow(ctx, id, contract.ActivityStateSignal,
		converter.NewRawValue(&commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/plain")}, Data: []byte("x")}),
		client.StartWorkflowOptions{TaskQueue: contract.TaskQueue}, mw, contract.MergeWalInput{Target: "generic:payload"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("the merge sent a signal that is not JSON: %v", err)
	}
	v, err := c.QueryWorkflow(ctx, id, run.GetRunID(), contract.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var st contract.MergeWalStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.RefusedSignals != 1 {
		t.Errorf("the status counts %d refused signals, want 1", st.RefusedSignals)
	}
}
