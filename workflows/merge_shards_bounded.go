package workflows

import "github.com/walkeeper/walkeeper/contract"

// shardsBoundedChange is the GetVersion change ID of a MergeWal whose plan holds at most
// contract.MaxCarriedShards shards: before it, each listing added the shards it named, so a
// chain that listed more distinct shards than that (listings of the oldest 1,024 move on as
// shards are merged) continued as new with a carry the next run refused as InvalidInput.
const shardsBoundedChange = "merge-shards-bounded"

// roomForShard reports whether a plan that already holds known shards may take one more: a
// bounded run stops at contract.MaxCarriedShards, so its carry always passes the next run's
// input check; the shards left out are listed by the next MergeWal, which the sweep starts
// while they have debt.
func roomForShard(bounded bool, known int) bool {
	return !bounded || known < contract.MaxCarriedShards
}
