package store

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// The in-process merge driver, MergeOnce and MergeAll, and what the merge phases share.

// MergeOnce repairs, prepares and commits one pass of shard ("" = own shard) in this process:
// a zero result when nothing is pending, ErrStalePreparation (aborted) when it could not
// publish.
func (s *Store) MergeOnce(ctx context.Context, shard string) (RoundShardResult, error) {
	if _, err := s.Repair(ctx, RepairParams{Shard: shard}); err != nil {
		return RoundShardResult{}, err
	}
	p, err := s.Prepare(ctx, PrepareParams{Shard: shard})
	if err != nil || p == nil {
		return RoundShardResult{}, err
	}
	rr, err := s.CommitRound(ctx, []*PreparedMerge{p})
	if len(rr.Shards) == 0 {
		return RoundShardResult{}, err
	}
	res := rr.Shards[0]
	if err == nil {
		err = res.Err()
	}
	if errors.Is(err, ErrStalePreparation) {
		_, _ = s.Abort(ctx, p)
	}
	return res, err
}

// MergeAll merges every pending generation of every shard, pass by pass, one commit at a
// time. It returns the number of generations reclaimed.
func (s *Store) MergeAll(ctx context.Context) (int, error) {
	total := 0
	for {
		shards, err := s.PendingShards(ctx)
		if err != nil {
			return total, err
		}
		if len(shards) == 0 {
			return total, nil
		}
		progress := false
		for _, sh := range shards {
			res, err := s.MergeOnce(ctx, sh.Shard)
			if err != nil {
				return total, err
			}
			total += res.Reclaimed
			progress = progress || res.Outcome == RoundCommitted || res.Outcome == RoundAlreadyCommitted
		}
		if !progress {
			return total, nil
		}
	}
}

// eachShard runs fn for each of items (a round's shard indexes, or shard ids),
// roundCleanupConcurrency at a time; fn writes only its own item's result. The first error
// cancels the rest and is returned; a panic is where's.
func eachShard[T any](ctx context.Context, s *Store, where string, items []T, fn func(ctx context.Context, it T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(roundCleanupConcurrency)
	for _, it := range items {
		g.Go(s.db.guard(where, func() error { return fn(gctx, it) }))
	}
	return g.Wait()
}

// mergeShard is the shard a merge step names: shard, or this process's own when "".
func (s *Store) mergeShard(shard string) (string, error) {
	shard = cmp.Or(shard, s.db.shard)
	return shard, validateShardID(shard)
}

func validateShardID(shard string) error {
	if shard == "" || len(shard) > 64 || strings.ContainsAny(shard, "/\\:") || strings.Contains(shard, "..") {
		return invalidf("bad shard id %q", shard)
	}
	return nil
}

func (s *Store) observePhase(phase string, start time.Time) {
	s.db.metrics.MergePhaseSeconds.WithLabelValues(phase).Observe(time.Since(start).Seconds())
}

func (s *Store) countMerge(result string, reclaimed int) {
	m := s.db.metrics
	m.MergeTotal.WithLabelValues(string(s.target.Kind), result).Inc()
	if reclaimed > 0 {
		m.GenerationsReclaimed.WithLabelValues(string(s.target.Kind)).Add(float64(reclaimed))
	}
}
