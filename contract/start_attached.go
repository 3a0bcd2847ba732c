package contract

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"
)

// ErrWorkflowIDTaken marks a start of a walkeeper workflow whose ID a running workflow of
// another type holds, started by someone with namespace access: every trigger would attach
// to it and the store would wait for it, for ever if it never ends.
var ErrWorkflowIDTaken = errors.New("workflow ID taken by a workflow of another type")

// workflowIDTaken is an ErrWorkflowIDTaken that names the holder.
type workflowIDTaken struct {
	id, runID string
	typ       string // the holder's workflow type, clipped to MaxStartErrorBytes
	want      string // the workflow type the start asked for
}

func (e *workflowIDTaken) Error() string {
	return fmt.Sprintf("workflow ID %s is held by a running %s workflow (run %s), not %s: no %s runs for this store until it ends (temporal workflow terminate -w %s)",
		e.id, e.typ, e.runID, e.want, e.want, e.id)
}

func (e *workflowIDTaken) Is(target error) bool { return target == ErrWorkflowIDTaken }

// metRunningKey keys the *bool of a start's context where the RPC interceptor of a client from
// temporaladmin.Config.ClientOptions notes that the start met a running workflow instead of
// beginning a run (the SDK does not say).
type metRunningKey struct{}

// NoteStartOutcome records, for the start made with ctx, whether the server began a new run;
// the client's RPC interceptor calls it with StartWorkflowExecutionResponse.Started.
func NoteStartOutcome(ctx context.Context, started bool) {
	if met, ok := ctx.Value(metRunningKey{}).(*bool); ok {
		*met = !started
	}
}

// checkAttached refuses the run a start with want attached to (metRunning: the server said it
// began none) when its type is not want; a client without the interceptor reports nothing
// and is not checked, so a start costs no describe unless it met a running workflow.
func checkAttached(ctx context.Context, c client.Client, run client.WorkflowRun, want string, metRunning bool) error {
	if !metRunning {
		return nil
	}
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		return fmt.Errorf("describe the run already under workflow ID %s: %w", run.GetID(), err)
	}
	if typ := d.GetWorkflowExecutionInfo().GetType().GetName(); typ != want {
		return &workflowIDTaken{id: run.GetID(), runID: run.GetRunID(), typ: Printable(Clip(typ, MaxStartErrorBytes)), want: want}
	}
	return nil
}
