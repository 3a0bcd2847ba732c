package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A StatsPage lists at most limit shards in shard id order, after its cursor, with totals
// over every shard; following Next visits each shard once, and the totals of every page equal
// the sums of the full walk.
func TestStatsPagesShards(t *testing.T) {
	ctx := context.Background()
	url := backends(t)["mem"]
	_, s := newGenericStore(t, url, "many")
	const writers = 7
	for i := range writers {
		w := openGeneric(t, openTestDB(t, url, fmt.Sprintf("w-%d", i)), "many")
		for g := range i%3 + 1 { // 1 to 3 pending generations
			seal(t, w, row(fmt.Sprintf("k%d-%d", i, g), 1))
		}
	}
	all := call(s.Stats(ctx)).must(t)
	require.Len(t, all.Shards, writers, "w1 wrote nothing and has no shard")
	require.True(t, slices.IsSortedFunc(all.Shards, func(a, b ShardStats) int { return strings.Compare(a.Shard, b.Shard) }))
	want := ShardTotals{}
	for _, sh := range all.Shards {
		want.add(sh)
	}
	require.Equal(t, want, all.Totals)
	require.Equal(t, 1+2+3+1+2+3+1, all.TotalPending())
	require.Equal(t, 3, all.Totals.MaxShardPending)
	require.Equal(t, writers, all.Totals.PendingShards)
	require.Empty(t, all.Next)

	var seen []string
	after := ""
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 4, "paging does not end")
		p := call(s.StatsPage(ctx, after, 3)).must(t)
		require.LessOrEqual(t, len(p.Shards), 3)
		require.Equal(t, all.Totals, p.Totals, "every page carries the totals of every shard")
		require.Equal(t, all.Rows, p.Rows)
		for _, sh := range p.Shards {
			seen = append(seen, sh.Shard)
		}
		if p.Next == "" {
			require.Equal(t, 3, pages)
			break
		}
		require.Equal(t, p.Shards[len(p.Shards)-1].Shard, p.Next)
		after = p.Next
	}
	var names []string
	for _, sh := range all.Shards {
		names = append(names, sh.Shard)
	}
	require.Equal(t, names, seen, "each shard once, in order")

	// A page that ends at the last shard has no next; limit 0 lists none.
	p := call(s.StatsPage(ctx, names[3], 3)).must(t)
	require.Len(t, p.Shards, 3)
	require.Empty(t, p.Next)
	p = call(s.StatsPage(ctx, "", 0)).must(t)
	require.Empty(t, p.Shards)
	require.NotNil(t, p.Shards)
	require.Empty(t, p.Next)
	require.Equal(t, all.Totals, p.Totals)

	for _, bad := range []struct {
		after string
		limit int
	}{{"nope", 1}, {names[0] + "x", 1}, {"", -1}, {"", MaxStatsShards + 1}} {
		_, err := s.StatsPage(ctx, bad.after, bad.limit)
		require.True(t, errors.Is(err, ErrInvalidInput), "%+v: %v", bad, err)
	}
}

// A page of MaxStatsShards worst-case shards (every number at its widest) stays under the
// 300 KiB docs/API.md and decision 0691 give for the stats route's answer.
func TestStatsPageStaysSmall(t *testing.T) {
	sh := ShardStats{Shard: ShardID("a"), PendingGenerations: math.MaxInt, PendingBytes: math.MaxInt64,
		Watermark: math.MaxUint64, OldestPending: time.Date(2026, 12, 1, 9, 43, 30, 809668574, time.FixedZone("", -11*3600)),
		WriterEpoch: math.MaxUint64, Quarantined: math.MaxInt}
	st := Stats{Target: "generic:" + strings.Repeat("n", 128), BaseVersion: math.MaxUint64, Runs: math.MaxInt, Rows: math.MaxInt64,
		BaseBytes: math.MaxInt64, Quarantined: math.MaxInt, Next: sh.Shard, Shards: slices.Repeat([]ShardStats{sh}, MaxStatsShards),
		Totals: ShardTotals{Shards: math.MaxInt, PendingShards: math.MaxInt, PendingGenerations: math.MaxInt,
			PendingBytes: math.MaxInt64, MaxShardPending: math.MaxInt, OldestPending: sh.OldestPending}}
	b := call(json.Marshal(st)).must(t)
	t.Logf("a page of %d worst-case shards: %d bytes", MaxStatsShards, len(b))
	require.Less(t, len(b), 300<<10)
}
