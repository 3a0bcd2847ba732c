package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// validator is a workflow input: contract's inputs check their own bounds, purely.
type validator interface{ Validate() error }

// checkInput is what every workflow does first: in's bounds (Validate), then, when in holds
// state that only continue-as-new hands over (carried names its field; "" = none), that this
// run really is its chain's continuation. It returns the run's failure, or nil. It issues no
// command, so it replays alike, and it fails only on inputs no recorded history holds.
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
// continue-as-new, which the server attests in the run's started event and no client can
// set: a start, a signal-with-start or a schedule never sets ContinuedExecutionRunID; a cron
// run or a retry does, but with the first run's input, so they are told apart by
// CronSchedule and Attempt (continue-as-new starts again at attempt 1). State carried in the
// input is trusted only then: it was written by walkeeper's own code in the previous run,
// and what storage can contradict is read again by the run (MergeWal lists its shards before
// planning). Pure.
func continuedAsNew(info *workflow.Info) bool {
	return info.ContinuedExecutionRunID != "" && info.CronSchedule == "" && info.Attempt <= 1
}

// invalidInput is the one place a workflow turns an input error into its Temporal failure:
// non-retryable ErrTypeInvalidInput, whose message is the error's ("invalid input: <field>:
// ..."). No cause is attached, so the failure reads as that one line.
func invalidInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypeInvalidInput, nil)
}

// checkOwnID fails a run whose workflow ID has the form of its target's ID own but names
// another store (contract.TargetIDError), before any command.
func checkOwnID(ctx workflow.Context, own, target string) error {
	if err := contract.TargetIDError(workflow.GetInfo(ctx).WorkflowExecution.ID, own, target); err != nil {
		return invalidInput(err)
	}
	return nil
}
