package workflows

import "github.com/walkeeper/walkeeper/contract"

// resultCappedChange is the GetVersion change ID of a MergeWal result that lists at most
// contract.MaxResultShards shards; before it, a result of every shard outgrew one payload.
const resultCappedChange = "merge-result-capped"

// carryBoundedChange is the GetVersion change ID of a carry that cuts each shard's failure
// text to contract.MaxCarryErrorBytes; only a run that continues as new records its marker.
const carryBoundedChange = "merge-carry-bounded"

// carry is what this run hands to its successor over continue-as-new: every shard's result,
// with each failure text cut to contract.MaxCarryErrorBytes when bounded.
func (r *mergeRun) carry(bounded bool) *contract.MergeWalCarry {
	shards := r.shardResults()
	if bounded {
		for i := range shards {
			shards[i].Error = contract.Clip(shards[i].Error, contract.MaxCarryErrorBytes-len("…"))
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
