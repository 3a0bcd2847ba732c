package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The finish phase of a merge: after the publish, each shard whose rows the base holds is
// drained, its merged generation files and demand records deleted, a losing attempt's
// unreferenced staged files deleted and its claim dropped. It takes no lock: every step is
// a relative or idempotent edit of objects the published version already made garbage.

// roundCleanupConcurrency bounds the shards checked, claimed, drained and cleaned up at once
// in a round; each shard's own deletes are bounded by mergeDeleteConcurrency. A shard's
// clean-up is a chain of round trips (drain: read and publish the shard manifest; the
// generation and demand deletes; the claim), not CPU, so a round of 64 shards at 16 at once
// is four waves of it.
const roundCleanupConcurrency = 16

// mergeDeleteConcurrency bounds the concurrent deletes of merged generation files.
const mergeDeleteConcurrency = 8

// finishRound finishes every shard whose rows the base holds, concurrently across shards.
// The first error is returned once every shard has been tried, so one shard's failure does
// not leave the others undrained.
//
// REQUIRES: for every shard whose outcome is committed or already_committed, a published
// base version's watermark covers its range (publishRound).
func (s *Store) finishRound(ctx context.Context, ps []*PreparedMerge, res *RoundCommitResult) error {
	var done []int
	for i, sr := range res.Shards {
		switch sr.Outcome {
		case RoundCommitted, RoundAlreadyCommitted:
			done = append(done, i)
		case RoundStale:
			s.countMerge("stale", 0)
		}
	}
	var mu sync.Mutex
	var first error
	_ = s.eachShard(ctx, done, func(ctx context.Context, i int) error {
		runs := 0
		if res.Shards[i].Outcome == RoundCommitted {
			runs = res.Runs
		}
		if err := s.finishShard(ctx, ps[i], &res.Shards[i], runs); err != nil {
			mu.Lock()
			if first == nil {
				first = fmt.Errorf("shard %s: %w", ps[i].Shard, err)
			}
			mu.Unlock()
		}
		return nil // the other shards go on
	})
	return first
}

// finishShard is everything that follows the publish of p's run: drain exactly p's
// generations, delete their files, clean up the shard's demand records (afterMergeDemand,
// with runs the base's run count after the publish, 0 when already committed), delete p's
// staged files if another attempt's run holds the rows (already committed and
// unreferenced), and drop the claim, which the watermark makes meaningless. It fills sr's
// Reclaimed and Deleted. A failed claim delete is returned so the caller's retry, which
// takes the already-committed path, deletes it; a failed generation delete is left for
// the next pass.
//
// REQUIRES: a published base version's watermark for p.Shard is at least p.Through.
func (s *Store) finishShard(ctx context.Context, p *PreparedMerge, sr *RoundShardResult, runs int) error {
	drainStart := time.Now()
	reclaimed, err := s.drain(ctx, p.Shard, p.Generations)
	s.observePhase("drain", drainStart)
	if err != nil {
		s.countMerge("failed", 0)
		return fmt.Errorf("drain failed: %w", err)
	}
	// The pass reclaims its generations whoever drains them: a retry of a commit whose first
	// attempt drained them and lost its reply finds nothing left to drain, and the one reply
	// the workflow sees must still count them. (The workflow counts a commit that Abort finds
	// present the same way.) The metrics count what this call drained.
	sr.Reclaimed = len(p.Generations)
	deleteStart := time.Now()
	sr.Deleted, _ = s.deleteMergedGenerations(ctx, p.Shard, p.Through)
	s.afterMergeDemand(ctx, p.Shard, p.Through, runs)
	s.observePhase("delete", deleteStart)
	if sr.Outcome == RoundAlreadyCommitted {
		if err := s.dropUnreferencedStaged(ctx, p); err != nil {
			return err
		}
		s.countMerge("already_committed", reclaimed)
	} else {
		s.countMerge("merged", reclaimed)
	}
	if err := s.dropClaim(ctx, p); err != nil {
		return fmt.Errorf("claim clean-up failed: %w", err)
	}
	return nil
}

// drain removes exactly gens from the shard manifest: a relative edit re-applied on every
// lost race, never "set the list to empty", so a seal that lands meanwhile is kept.
//
// INVARIANT: a seal that lands during the drain is never lost.
// REQUIRES: gens are at or below shard's watermark in a published base version.
func (s *Store) drain(ctx context.Context, shard string, gens []uint64) (int, error) {
	drop := make(map[uint64]bool, len(gens))
	for _, g := range gens {
		drop[g] = true
	}
	removed := 0
	if _, err := s.editShard(ctx, shard, func(m *manifest.Shard) (bool, error) {
		keep := m.Flushed[:0:0]
		for _, g := range m.Flushed {
			if !drop[g.Gen] {
				keep = append(keep, g)
			}
		}
		removed = len(m.Flushed) - len(keep)
		m.Flushed = keep
		return removed > 0, nil
	}); err != nil {
		return 0, err
	}
	return removed, nil
}

// deleteMergedGenerations deletes generation files at or below through that the latest
// shard manifest no longer lists. Called only after the drain, so no reader can be
// directed to them any more: readers skip generations at or below the watermark.
//
// REQUIRES: the base version whose watermark for shard is at least through is published
// (the deletes come after the commit that makes the files garbage).
func (s *Store) deleteMergedGenerations(ctx context.Context, shard string, through uint64) (int, error) {
	m, err := s.loadShard(ctx, shard)
	if err != nil || m == nil {
		return 0, err
	}
	listed := map[string]bool{}
	for _, g := range m.Flushed {
		listed[g.Path] = true
	}
	for _, q := range m.Quarantined {
		listed[q.Path] = true // set aside for repair: never garbage
	}
	files, err := s.db.listGenerations(ctx, s.target, shard)
	if err != nil {
		return 0, err
	}
	// Delete concurrently: on object storage each delete is a round trip, and a pass
	// merges up to merge_max_generations files. The first error is returned with the count
	// of files actually deleted; the rest are left for the next pass.
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeDeleteConcurrency)
	for _, f := range files {
		if f.gen > through || listed[f.key] {
			continue
		}
		g.Go(s.db.guard("generation delete", func() error {
			if err := s.db.bucket.Delete(gctx, f.key); err != nil {
				return err
			}
			s.db.cache.forget(f.key)
			n.Add(1)
			return nil
		}))
	}
	err = g.Wait()
	return int(n.Load()), err
}

// dropUnreferencedStaged deletes an attempt's staged files when the latest base does not
// reference them (another attempt committed the same generations first).
//
// REQUIRES: the watermark covers p's range (manifest.RangeCommitted), so no commit of p can
// publish them any more.
func (s *Store) dropUnreferencedStaged(ctx context.Context, p *PreparedMerge) error {
	base, err := s.loadBase(ctx)
	if err != nil {
		return err
	}
	for _, f := range p.Staged {
		if !baseKeeps(base, f.Path) {
			if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
				return err
			}
		}
	}
	return nil
}
