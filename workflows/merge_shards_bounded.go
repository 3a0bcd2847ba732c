package workflows

import "github.com/walkeeper/walkeeper/contract"

// shardsBoundedChange is the GetVersion change ID of a MergeWal whose plan holds at most
// contract.MaxCarriedShards shards; before it, a chain whose listings named more continued as
// new with a carry the next run refused as InvalidInput.
const shardsBoundedChange = "merge-shards-bounded"

// roomForShard reports whether a plan that holds known shards may take one more; the shards a
// bounded run leaves out are listed by the next MergeWal, which the sweep starts.
func roomForShard(bounded bool, known int) bool {
	return !bounded || known < contract.MaxCarriedShards
}
