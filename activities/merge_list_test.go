package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

// TestListPendingShardsIsCapped: a store with more pending shards than
// contract.MaxListedShards lists the oldest of them, under the payload budget, and counts
// the rest; once listed shards are merged, the next listing reaches those left out.
func TestListPendingShardsIsCapped(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	const target = "generic:many"
	first := openDB(t, url, "w-0000")
	s := seal(t, first, target, []string{"a"})
	for i := 1; i < contract.MaxListedShards; i++ {
		seal(t, openDB(t, url, fmt.Sprintf("w-%04d", i)), target, []string{"a"})
	}
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	var newest time.Time
	for _, sh := range st.Shards {
		if sh.OldestPending.After(newest) {
			newest = sh.OldestPending
		}
	}
	time.Sleep(min(time.Until(newest), 5*time.Second) + time.Millisecond) // the late shards are newer
	var late []string
	for _, inst := range []string{"late-1", "late-2"} {
		db := openDB(t, url, inst)
		seal(t, db, target, []string{"a"}, []string{"b"})
		late = append(late, db.Shard())
	}

	env := newActivityEnv(t, &Activities{DB: first})
	params := contract.ListPendingShardsParams{Target: target}
	listed := mustRun[contract.ListPendingShardsResult](t, env, contract.ListPendingShardsActivity, params)
	require.Len(t, listed.Shards, contract.MaxListedShards)
	require.Equal(t, 2, listed.Unlisted)
	names := shardNames(listed.Shards)
	for i := 1; i < len(names); i++ {
		require.Less(t, names[i-1], names[i], "shard order")
	}
	for _, sh := range late {
		require.NotContains(t, names, sh, "the newest shards are left out")
	}
	b, err := json.Marshal(listed)
	require.NoError(t, err)
	require.Less(t, len(b), contract.MaxPayloadBytes)

	// A following run merges what it listed; the next listing reaches the shards left out.
	for _, sh := range listed.Shards[:2] {
		prep := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, contract.PrepareParams{Target: target, Shard: sh.Shard})
		require.NotNil(t, prep.Prepared)
		require.Equal(t, contract.RoundCommitted, commitOne(t, env, *prep.Prepared).Outcome)
	}
	again := mustRun[contract.ListPendingShardsResult](t, env, contract.ListPendingShardsActivity, params)
	require.Len(t, again.Shards, contract.MaxListedShards)
	require.Zero(t, again.Unlisted)
	require.Subset(t, shardNames(again.Shards), late, "a shard left out is listed once older ones are merged")
}

// TestListedShardsStayUnderThePayloadBudget: MaxListedShards entries at their widest (64-byte
// shard ids, every number at its largest) encode to less than contract.MaxPayloadBytes.
func TestListedShardsStayUnderThePayloadBudget(t *testing.T) {
	res := contract.ListPendingShardsResult{Unlisted: 1 << 40}
	at := time.Date(2026, 12, 5, 4, 47, 58, 123456789, time.FixedZone("", -9*3600-30*60))
	for i := range contract.MaxListedShards {
		res.Shards = append(res.Shards, contract.ShardPending{Shard: fmt.Sprintf("%064d", i), Pending: 1 << 62,
			PendingBytes: 1 << 62, Watermark: 1<<64 - 1, OldestPending: at})
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.Less(t, len(b), contract.MaxPayloadBytes)
}

// TestPickListedIsOldestFirst: the cap keeps the shards with the oldest pending generation
// (unknown age first, then more pending, then shard id on ties), in shard order.
func TestPickListedIsOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := []contract.ShardPending{
		{Shard: "a", Pending: 9, OldestPending: t0.Add(3 * time.Minute)},
		{Shard: "b", Pending: 1, OldestPending: t0},
		{Shard: "c", Pending: 2},
		{Shard: "d", Pending: 5, OldestPending: t0.Add(time.Minute)},
		{Shard: "e", Pending: 6, OldestPending: t0.Add(time.Minute)},
	}
	got, unlisted := pickListed(in, 3)
	require.Equal(t, 2, unlisted)
	require.Equal(t, []string{"b", "c", "e"}, shardNames(got))
	got, unlisted = pickListed(in, 10)
	require.Zero(t, unlisted)
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, shardNames(got))
	got, _ = pickListed(nil, 3)
	require.NotNil(t, got, "an empty listing encodes as [] as before")
}

func shardNames(in []contract.ShardPending) []string {
	out := make([]string, 0, len(in))
	for _, sh := range in {
		out = append(out, sh.Shard)
	}
	return out
}
