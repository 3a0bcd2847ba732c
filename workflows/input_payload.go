package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// rawInput is how Register runs a workflow fn: contract.DecodeInputPayload decodes the raw
// first payload into fn's input, so a bad payload or a second argument (extra) fails the run
// as invalid input (decision 0561), and members no field takes are reported (noteIgnoredFields).
func rawInput[In, Out any](fn func(workflow.Context, In) (Out, error)) func(workflow.Context, converter.RawValue, converter.RawValue) (Out, error) {
	return func(ctx workflow.Context, arg, extra converter.RawValue) (Out, error) {
		var in In
		if err := contract.DecodeInputPayload(arg.Payload(), extra.Payload() != nil, &in); err != nil {
			var zero Out
			return zero, invalidInput(err)
		}
		return fn(noteIgnoredFields(ctx, arg.Payload().GetData(), &in), in)
	}
}
