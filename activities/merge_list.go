package activities

import (
	"sort"

	"github.com/walkeeper/walkeeper/contract"
)

// pickListed keeps at most limit of the pending shards, oldest pending generation first (zero:
// oldest), and returns them in shard order with the number left out. A shard left out keeps
// its oldest generation while the others' get younger, so it moves up until listed. Pure.
func pickListed(shards []contract.ShardPending, limit int) ([]contract.ShardPending, int) {
	out := append(make([]contract.ShardPending, 0, len(shards)), shards...)
	unlisted := 0
	if len(out) > limit {
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if !a.OldestPending.Equal(b.OldestPending) {
				return a.OldestPending.Before(b.OldestPending)
			}
			if a.Pending != b.Pending {
				return a.Pending > b.Pending
			}
			return a.Shard < b.Shard
		})
		unlisted = len(out) - limit
		out = out[:limit]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out, unlisted
}
