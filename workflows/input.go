package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// validator is a workflow input: contract's inputs check their own bounds, purely.
type validator interface{ Validate() error }

// checkInput is what every workflow does first: in's bounds (Validate), then, when in holds
// state only continue-as-new hands over (carried names its field; "" = none), that this run
// is its chain's continuation. It issues no command, so it replays alike.
func checkInput(ctx workflow.Context, in validator, carried string) error {
	if err := in.Validate(); err != nil {
		return invalidInput(err)
	}
	if carried != "" && !continuedAsNew(workflow.GetInfo(ctx)) {
		return invalidInput(contract.CarriedOnStartError(carried))
	}
	return nil
}

// continuedAsNew reports whether the run of info was started by its predecessor's
// continue-as-new, which the server attests and no client can set (a cron run or a retry also
// sets ContinuedExecutionRunID, but not with a carry: CronSchedule and Attempt tell them
// apart), so that carried state is trusted only then. Pure.
func continuedAsNew(info *workflow.Info) bool {
	return info.ContinuedExecutionRunID != "" && info.CronSchedule == "" && info.Attempt <= 1
}

// invalidInput is the one place a workflow turns an input error into its failure:
// non-retryable ErrTypeInvalidInput without a cause, so it reads as the error's one line.
func invalidInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypeInvalidInput, nil)
}

// checkTargetInput is checkInput for a workflow of one store, which also parses its target
// (Validate did already) and, when ownID is set, fails a run whose workflow ID has the form of
// the target's ID but names another store (contract.TargetIDError), before any command.
func checkTargetInput(ctx workflow.Context, in validator, carried, rawTarget string, ownID func(target.Target) string) (target.Target, error) {
	if err := checkInput(ctx, in, carried); err != nil {
		return target.Target{}, err
	}
	tgt, err := target.ParseTarget(rawTarget)
	if err != nil {
		return tgt, invalidInput(err)
	}
	if ownID != nil {
		if err := contract.TargetIDError(workflow.GetInfo(ctx).WorkflowExecution.ID, ownID(tgt), tgt.String()); err != nil {
			return tgt, invalidInput(err)
		}
	}
	return tgt, nil
}
