package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// Register registers every walkeeper workflow on r under its explicit name, taking its input
// as raw payloads (rawInput); a replayer qualifies too.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(rawInput(MergeWal), workflow.RegisterOptions{Name: contract.MergeWalWorkflow})
	r.RegisterWorkflowWithOptions(rawInput(CompactBase), workflow.RegisterOptions{Name: contract.CompactBaseWorkflow})
	r.RegisterWorkflowWithOptions(rawInput(MaintenanceSweep), workflow.RegisterOptions{Name: contract.MaintenanceSweepWorkflow})
	r.RegisterWorkflowWithOptions(rawInput(SweepWindow), workflow.RegisterOptions{Name: contract.SweepWindowWorkflow})
	r.RegisterWorkflowWithOptions(rawInput(MergeWalTick), workflow.RegisterOptions{Name: contract.MergeWalTickWorkflow})
	r.RegisterWorkflowWithOptions(rawInput(ReconcileDemand), workflow.RegisterOptions{Name: contract.ReconcileDemandWorkflow})
}

// ensureTargetAttributes upserts WalTarget, WalKind and WalTrigger when the start did not set
// them, in one upsert, so every run is findable by target; it reports whether it upserted.
func ensureTargetAttributes(ctx workflow.Context, t target.Target, trigger string) bool {
	sa := workflow.GetTypedSearchAttributes(ctx)
	var updates []temporal.SearchAttributeUpdate
	if v, ok := sa.GetKeyword(contract.WalTarget); !ok || v != t.String() {
		updates = append(updates, contract.WalTarget.ValueSet(t.String()), contract.WalKind.ValueSet(string(t.Kind)))
	}
	if _, ok := sa.GetKeyword(contract.WalTrigger); !ok {
		updates = append(updates, contract.WalTrigger.ValueSet(contract.TriggerOrUnknown(trigger)))
	}
	if len(updates) == 0 {
		return false
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		workflow.GetLogger(ctx).Warn("Cannot set target search attributes.", "error", err)
		return false
	}
	return true
}
