package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The finish phase of a merge: after the publish, each shard whose rows the base holds is
// drained, its merged generation files and demand records deleted, a losing attempt's
// unreferenced staged files deleted and its claim dropped. It takes no lock: every step is
// a relative or idempotent edit of objects the published version already made garbage.

// roundCleanupConcurrency bounds the shards cleaned up at once in a round, since each shard's
// clean-up is a chain of round trips, not CPU.
const roundCleanupConcurrency = 16

// mergeDeleteConcurrency bounds the concurrent deletes of merged generation files.
const mergeDeleteConcurrency = 8

// finishRound finishes every shard whose rows the base holds, concurrently, and returns the
// error of the first shard in round order that failed, once every shard was tried.
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
	errs := make([]error, len(ps))
	_ = eachShard(ctx, s, "shard step", done, func(ctx context.Context, i int) error {
		runs := 0
		if res.Shards[i].Outcome == RoundCommitted {
			runs = res.Runs
		}
		if err := s.finishShard(ctx, ps[i], &res.Shards[i], runs); err != nil {
			errs[i] = fmt.Errorf("shard %s: %w", ps[i].Shard, err)
		}
		return nil // the other shards go on
	})
	return cmp.Or(errs...)
}

// finishShard is everything that follows the publish of p's run: drain p's generations,
// delete their files and demand records, delete p's staged files if another attempt's run
// holds the rows, and drop the claim the watermark made meaningless. A failed claim delete is
// returned, so the caller's retry deletes it; a failed generation delete is left for the
// next pass.
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
	// Reported whoever drains them, so that a retried commit whose first reply was lost
	// still reports them, unless another attempt published them (below); the metrics count
	// what this call drained.
	sr.Reclaimed = len(p.Generations)
	deleteStart := time.Now()
	sr.Deleted, _ = s.deleteMergedGenerations(ctx, p.Shard, p.Through)
	s.afterMergeDemand(ctx, p.Shard, p.Through, runs)
	s.observePhase("delete", deleteStart)
	if sr.Outcome == RoundAlreadyCommitted {
		published, err := s.dropUnreferencedStaged(ctx, p)
		if err != nil {
			return err
		}
		if !published {
			// Another attempt's run holds the pass: that attempt reports it, so two runs
			// racing on one pass count it once.
			sr.Reclaimed = 0
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
		keep := slices.DeleteFunc(slices.Clone(m.Flushed), func(g manifest.Gen) bool { return drop[g.Gen] })
		removed = len(m.Flushed) - len(keep)
		m.Flushed = keep
		return removed > 0, nil
	}); err != nil {
		return 0, err
	}
	return removed, nil
}

// deleteMergedGenerations deletes generation files at or below through that the latest
// shard manifest no longer lists, and the unlisted files of a fenced writer epoch whatever
// their number, which no manifest will ever list (decision 0631).
//
// REQUIRES: the base version whose watermark for shard is at least through is published.
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
	// Concurrently, since each delete is a round trip; the first error is returned with the
	// count actually deleted.
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeDeleteConcurrency)
	for _, f := range files {
		// A file of the current epoch above through may be a seal between its put and its
		// manifest; one of an older epoch is a seal its writer can no longer publish.
		if (f.gen > through && f.epoch >= m.WriterEpoch) || listed[f.key] {
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
// reference them (another attempt committed the same generations first), and reports
// whether it references one (this attempt's commit published them). A run a compaction has
// folded since is referenced no more, so a retry that comes after it reports false.
//
// REQUIRES: the watermark covers p's range (manifest.RangeCommitted), so no commit of p can
// publish them any more.
func (s *Store) dropUnreferencedStaged(ctx context.Context, p *PreparedMerge) (published bool, err error) {
	base, err := s.loadBase(ctx)
	if err != nil {
		return false, err
	}
	for _, f := range p.Staged {
		if baseKeeps(base, f.Path) {
			published = true
			continue
		}
		if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
			return published, err
		}
	}
	return published, nil
}
