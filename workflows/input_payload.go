package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// rawInput is how Register runs a workflow fn: the SDK hands over the start's payloads
// undecoded (a converter.RawValue parameter is never decoded), and contract.DecodeInputPayload
// decodes the first into fn's input. The SDK's own decode failed a payload that is not JSON
// with a retryable error naming the Go type, ran `null` as no input and dropped a second
// argument; through rawInput each fails the run like any other bad input, before any command
// (decision 0561). extra is the second argument, absent (nil) on every start walkeeper makes.
// A JSON input decodes exactly as before, so every recorded history replays alike.
func rawInput[In, Out any](fn func(workflow.Context, In) (Out, error)) func(workflow.Context, converter.RawValue, converter.RawValue) (Out, error) {
	return func(ctx workflow.Context, arg, extra converter.RawValue) (Out, error) {
		var in In
		if err := contract.DecodeInputPayload(arg.Payload(), extra.Payload() != nil, &in); err != nil {
			var zero Out
			return zero, invalidInput(err)
		}
		return fn(ctx, in)
	}
}
