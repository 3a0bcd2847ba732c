package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// resultCappedChange is the GetVersion change ID of a MergeWal result that lists at most
// contract.MaxResultShards shards; before it, a result of every shard outgrew one payload.
const resultCappedChange = "merge-result-capped"

// resultErrorsCutChange is the GetVersion change ID of a MergeWal result whose listed errors
// are each cut to contract.MaxFailureTextBytes of JSON, escapes included, where the bytes of
// text escaping grows sixfold made 32 failed shards over 700 KiB.
const resultErrorsCutChange = "merge-result-errors-cut"

// carryBoundedChange is the GetVersion change ID of a carry that cuts each shard's failure
// text to contract.MaxCarryErrorBytes; only a run that continues as new records its marker.
const carryBoundedChange = "merge-carry-bounded"

// carryJSONBoundedChange is the GetVersion change ID of a carry that cuts each shard's
// failure text to contract.MaxCarryErrorBytes of JSON, escapes included, where
// carryBoundedChange cut bytes of text that escaping grows sixfold; only a run that
// continues as new reads it.
const carryJSONBoundedChange = "merge-carry-json-bounded"

// carryCut is how a carry cuts each shard's failure text.
type carryCut int

const (
	carryUncut   carryCut = iota // the whole text (before carryBoundedChange)
	carryTextCut                 // contract.MaxCarryErrorBytes of text (carryBoundedChange)
	carryJSONCut                 // contract.MaxCarryErrorBytes of JSON (carryJSONBoundedChange)
)

// carryCutOf is the cut of this run's carry: the newest gate first, so a run that records
// carryJSONBoundedChange needs no marker of the older change.
func carryCutOf(ctx workflow.Context) carryCut {
	switch {
	case gated(ctx, carryJSONBoundedChange):
		return carryJSONCut
	case gated(ctx, carryBoundedChange):
		return carryTextCut
	}
	return carryUncut
}

// carry is what this run hands to its successor over continue-as-new: every shard's result,
// with each failure text cut as cut says.
func (r *mergeRun) carry(cut carryCut) *contract.MergeWalCarry {
	shards := r.shardResults()
	for i := range shards {
		switch cut {
		case carryTextCut:
			shards[i].Error = contract.Clip(shards[i].Error, contract.MaxCarryErrorBytes-len("…"))
		case carryJSONCut:
			shards[i].Error = contract.CarryErrorText(shards[i].Error)
		}
	}
	return &contract.MergeWalCarry{WorkflowRuns: r.workflowRun, Shards: shards, PendingAtStart: r.pendingAtStart,
		Actions: r.actions()}
}

// shardResults is every shard's result, in shard order, for the run's result and its carry.
func (r *mergeRun) shardResults() []contract.ShardMergeResult {
	out := make([]contract.ShardMergeResult, 0, len(r.shards))
	for _, sh := range r.shards {
		out = append(out, sh.res)
	}
	return out
}

// shardsBoundedChange is the GetVersion change ID of a plan of at most
// contract.MaxCarriedShards shards, so the next run's input check passes the carry.
const shardsBoundedChange = "merge-shards-bounded"

// roomForShard reports whether a plan that holds known shards may take one more; the shards a
// bounded run leaves out are listed by the next MergeWal, which the sweep starts.
func roomForShard(bounded bool, known int) bool {
	return !bounded || known < contract.MaxCarriedShards
}
