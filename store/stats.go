package store

import (
	"context"
	"slices"
	"time"

	"github.com/walkeeper/walkeeper/target"
)

// MaxStatsShards caps the shards one StatsPage lists.
const MaxStatsShards = 1000

// ShardStats is one shard's debt.
type ShardStats struct {
	Shard              string    `json:"shard"`
	PendingGenerations int       `json:"pending_generations"`
	PendingBytes       int64     `json:"pending_bytes"`
	Watermark          uint64    `json:"watermark"`
	OldestPending      time.Time `json:"oldest_pending,omitzero"`
	WriterEpoch        uint64    `json:"writer_epoch"`
	// Quarantined counts this shard's generations and WAL objects an operator set aside.
	Quarantined int `json:"quarantined,omitempty"`
}

// ShardTotals sums the debt of every shard of a store, whether a page lists it or not.
type ShardTotals struct {
	Shards int `json:"shards"`
	// PendingShards counts the shards with at least one pending generation.
	PendingShards      int   `json:"pending_shards"`
	PendingGenerations int   `json:"pending_generations"`
	PendingBytes       int64 `json:"pending_bytes"`
	// MaxShardPending is the most pending generations of one shard: what --pending-max
	// bounds per shard.
	MaxShardPending int `json:"max_shard_pending"`
	// OldestPending is the seal time of the oldest pending generation of any shard.
	OldestPending time.Time `json:"oldest_pending,omitzero"`
}

func (t *ShardTotals) add(sh ShardStats) {
	t.Shards++
	if sh.PendingGenerations > 0 {
		t.PendingShards++
	}
	t.PendingGenerations += sh.PendingGenerations
	t.PendingBytes += sh.PendingBytes
	t.MaxShardPending = max(t.MaxShardPending, sh.PendingGenerations)
	if !sh.OldestPending.IsZero() && (t.OldestPending.IsZero() || sh.OldestPending.Before(t.OldestPending)) {
		t.OldestPending = sh.OldestPending
	}
}

// Stats is a store's shape, as the stats route, walkeeper status and merges see it: the base
// table, the totals of every shard, and the shards of one page (of every shard, from
// Store.Stats).
type Stats struct {
	Target      string `json:"target"`
	BaseVersion uint64 `json:"base_version"`
	Runs        int    `json:"runs"`
	Rows        int64  `json:"rows"`
	BaseBytes   int64  `json:"base_bytes"`
	// Quarantined counts objects (runs, and every shard's generations and WAL objects) an
	// operator set aside.
	Quarantined int         `json:"quarantined,omitempty"`
	Totals      ShardTotals `json:"totals"`
	// Shards are in shard id order.
	Shards []ShardStats `json:"shards"`
	// Next is the last shard listed when more follow: the after of the next page.
	Next string `json:"next,omitempty"`
}

// TotalPending is the pending generations of every shard, listed or not.
func (s Stats) TotalPending() int { return s.Totals.PendingGenerations }

// Stats reports the base table and every shard's debt, for callers in this process that walk
// every shard (merges, tests, benchmarks); an answer that leaves the process is a StatsPage.
// It does not enforce the read caps: schedulers must see a store that readers refuse.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	return s.stats(ctx, "", -1)
}

// StatsPage is Stats with at most limit shards (0 lists none, for callers that want the
// totals), those whose id sorts after after ("" = from the first). Beyond what the read's
// snapshot loads (every shard's manifest) it holds the page and the totals.
func (s *Store) StatsPage(ctx context.Context, after string, limit int) (Stats, error) {
	if after != "" && !IsShardID(after) {
		return Stats{}, invalidf("after %q is not a shard id", target.Clip(after))
	}
	if limit < 0 || limit > MaxStatsShards {
		return Stats{}, invalidf("limit %d is not in 0..%d", limit, MaxStatsShards)
	}
	return s.stats(ctx, after, limit)
}

// stats lists at most limit shards after after (limit < 0: every shard).
func (s *Store) stats(ctx context.Context, after string, limit int) (Stats, error) {
	snap, err := s.snapshot(ctx, false)
	if err != nil {
		return Stats{}, err
	}
	// Bucket.ListDirs sorts already, so this costs a pass; cursors rely on the order.
	slices.Sort(snap.shards)
	n := len(snap.shards)
	if limit >= 0 {
		n = min(n, limit)
	}
	st := Stats{
		Target:      s.target.String(),
		BaseVersion: snap.base.Version,
		Runs:        len(snap.base.Runs),
		Shards:      make([]ShardStats, 0, n),
		Quarantined: len(snap.base.Quarantined),
	}
	for _, r := range snap.base.Runs {
		st.Rows, st.BaseBytes = st.Rows+r.Rows, st.BaseBytes+r.Bytes
	}
	for _, sh := range snap.shards {
		ss := snap.shardStats(sh)
		st.Quarantined += ss.Quarantined
		st.Totals.add(ss)
		switch {
		case after != "" && sh <= after: // an earlier page's
		case limit < 0 || len(st.Shards) < limit:
			st.Shards = append(st.Shards, ss)
		case limit > 0 && st.Next == "":
			st.Next = st.Shards[limit-1].Shard
		}
	}
	return st, nil
}

// shardStats is shard sh's debt in the snapshot.
func (snap *readSnapshot) shardStats(sh string) ShardStats {
	m := snap.manifests[sh]
	ss := ShardStats{Shard: sh, Watermark: snap.base.Watermarks[sh], WriterEpoch: m.WriterEpoch, Quarantined: len(m.Quarantined)}
	for _, g := range snap.pending[sh] {
		ss.PendingGenerations++
		ss.PendingBytes += g.Bytes
		if ss.OldestPending.IsZero() || g.SealedAt.Before(ss.OldestPending) {
			ss.OldestPending = g.SealedAt
		}
	}
	return ss
}

// PendingShards returns the shards with pending generations (no read caps).
func (s *Store) PendingShards(ctx context.Context) ([]ShardStats, error) {
	st, err := s.Stats(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(st.Shards, func(sh ShardStats) bool { return sh.PendingGenerations == 0 }), nil
}
