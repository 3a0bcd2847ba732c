package temporaladmin

import (
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/walkeeper/walkeeper/contract"
)

// reportStartOutcome passes a StartWorkflowExecution answer's Started to the start that made
// the call, which the SDK's ExecuteWorkflow does not return: only a start that met a running
// workflow checks that workflow's type (contract.ErrWorkflowIDTaken).
func reportStartOutcome(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if resp, ok := reply.(*workflowservice.StartWorkflowExecutionResponse); ok && err == nil {
		contract.NoteStartOutcome(ctx, resp.GetStarted())
	}
	return err
}
