package activities

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
)

// The sweep's scan aggregates one store's demand records at a time in the order the listing
// gives them (a shard's together, by generation), so what it holds does not grow with the
// store's records: it kept a set of every generation seen, and a store whose index held a
// million records (hand-made ones, or shards far behind) cost the scan tens of MB.
func TestFindingScanDemandHoldsNoSetOfAStoresGenerations(t *testing.T) {
	const shards, perShard = 4, 1 << 18
	target := store.Target{Kind: store.Kind("generic"), Name: "deep"}
	sealed := time.Unix(1_700_000_000, 0).UTC()
	agg := &storeDemand{}
	agg.reset(target)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for sh := range shards {
		shard := string(rune('a'+sh)) + "-shard"
		for g := range perShard {
			r := store.DemandRecord{Target: target, Shard: shard, Gen: uint64(g + 1), SealedAt: sealed.Add(time.Duration(g) * time.Second), Bytes: 10}
			agg.add(r)
			if g%1000 == 0 {
				agg.add(r) // a re-sealed generation's second record, listed next to the first
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	got := agg.result(sealed.Add(perShard * time.Second))
	runtime.KeepAlive(agg)
	t.Logf("%d records of one store: the aggregate holds %d bytes", shards*perShard, held)
	require.Equal(t, shards*perShard, got.Pending, "re-sealed generations count once")
	require.Equal(t, shards, got.PendingShards)
	require.Equal(t, perShard, got.MaxShardPending)
	require.Equal(t, int64(10*shards*perShard), got.PendingBytes)
	require.Equal(t, perShard*time.Second, got.OldestPendingAge)
	require.Less(t, held, int64(1<<20), "the aggregate of one store grows with its records")
}
