package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// CommitRound: Commit for the prepared merges of several shards at once, in one base
// version. One commit per table is in flight at a time (the workflow's commit loop), so a
// table whose commits each cover one shard folds one shard's pass per commit whatever its
// number of writers; a round commit covers up to MaxRoundShards passes, and the table's fold
// rate grows with its shards (docs/DESIGN.md §3, docs/FORMAT.md "Round commit").
//
// Every rule of Commit holds per shard: each attempt is claimed before it is published, each
// shard's watermark moves to its own Through, drains are relative and run only after the
// publish, deletes only after the drain, and a retry after a publish reports "already
// committed" from the watermarks alone. A shard whose preparation is stale is left out of
// the version and reported; the others are published without it.

// MaxRoundShards caps the prepared merges one CommitRound takes. The round's activity
// input is the list of PreparedMerges: one of 64 generations with short keys encodes to
// ~0.8 KiB of JSON, so 64 of them are ~50 KiB, under the caller's 64 KiB cap
// (contract.MaxRoundBytes, at which the workflow's commit loop closes a round); one with a
// 200-character staged path and 256-byte min/max keys to ~2.1 KiB, so that cap closes a
// round of those at ~30, and even 64 of them would be ~135 KiB, under the 256 KiB payload
// budget (TestRoundInputSize pins both). It was 32: a round over 200 shards then took 7
// CommitRounds, each an activity's orchestration and a base version (docs/benchmarks/incident.md,
// "Run D").
const MaxRoundShards = 64

// Round outcomes, per shard (RoundShardResult.Outcome).
const (
	// RoundCommitted: this call published the shard's staged run.
	RoundCommitted = "committed"
	// RoundAlreadyCommitted: the shard's watermark already covered the range (a retry after
	// a publish, or another attempt merged the same generations); its clean-up was redone.
	RoundAlreadyCommitted = "already_committed"
	// RoundStale: the preparation can never publish (the watermark moved into its range, its
	// staged files are gone, or its attempt was claimed "abort"). Left out of the version;
	// the caller aborts it as after a stale Commit, and prepares the shard again.
	RoundStale = "stale"
)

// RoundShardResult is one shard's part of a CommitRound, in the order of the input.
type RoundShardResult struct {
	Shard   string `json:"shard"`
	Through uint64 `json:"through"`
	Outcome string `json:"outcome"`
	// BaseVersion is the version that holds the shard's rows (0 when stale).
	BaseVersion uint64 `json:"base_version,omitempty"`
	Reclaimed   int    `json:"reclaimed,omitempty"`
	Deleted     int    `json:"deleted,omitempty"`
	// Reason says why a shard is stale.
	Reason string `json:"reason,omitempty"`
}

// RoundCommitResult reports one CommitRound.
type RoundCommitResult struct {
	// BaseVersion is the version this call published; 0 when it published none (every
	// shard was already committed or stale).
	BaseVersion uint64 `json:"base_version"`
	// Runs is the base's run count after the published version (0 when none was).
	Runs     int                `json:"runs,omitempty"`
	LockHold time.Duration      `json:"lock_hold"`
	Shards   []RoundShardResult `json:"shards"`
}

// roundCleanupConcurrency bounds the shards checked, claimed, drained and cleaned up at once
// in a round; each shard's own deletes are bounded by mergeDeleteConcurrency. A shard's
// clean-up is a chain of round trips (drain: read and publish the shard manifest; the
// generation and demand deletes; the claim), not CPU, so a round of 64 shards at 16 at once
// is four waves of it; at 4 at once a round of 32 was eight, seconds on object storage
// before the next round could start.
const roundCleanupConcurrency = 16

// CommitRound publishes the still-open prepared merges of ps in one base version v+1 = runs
// + every included staged run, each shard's watermark at its Through; then drains each shard
// and deletes what the version made garbage, as Commit does for one. ps must name distinct
// shards of this store, at most MaxRoundShards; anything else is ErrInvalidInput and writes
// nothing.
//
// Per shard the result says committed, already_committed or stale. An error means the call
// did not finish: nothing was published if it came before the publish (the shards' claims
// say "commit", so a retry goes on where it stopped), and the clean-up after it failed
// otherwise; a retry then reports those shards already committed and finishes it.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) CommitRound(ctx context.Context, ps []*PreparedMerge) (RoundCommitResult, error) {
	if err := s.validateRound(ps); err != nil {
		return RoundCommitResult{}, err
	}
	res := RoundCommitResult{Shards: make([]RoundShardResult, len(ps))}
	for i, p := range ps {
		res.Shards[i] = RoundShardResult{Shard: p.Shard, Through: p.Through}
	}
	commitStart := time.Now()
	err := s.publishRound(ctx, ps, &res)
	s.observePhase("commit", commitStart)
	if err != nil {
		s.countMerge("failed", 0)
		return res, err
	}

	// INVARIANT: the drains and deletes run only after the base version that makes them
	// garbage is published; a crash in between is repaired by the retry or by the next
	// prepare of each shard (reconcile).
	if err := s.cleanUpRound(ctx, ps, &res); err != nil {
		return res, fmt.Errorf("round committed (base version %d) but clean-up failed: %w", res.BaseVersion, err)
	}
	counts := map[string]int{}
	for _, sr := range res.Shards {
		counts[sr.Outcome]++
	}
	s.db.log.Info("merge round committed", zap.String("target", s.target.String()),
		zap.Int("shards", len(ps)), zap.Int("committed", counts[RoundCommitted]),
		zap.Int("already_committed", counts[RoundAlreadyCommitted]), zap.Int("stale", counts[RoundStale]),
		zap.Uint64("base_version", res.BaseVersion), zap.Duration("lock_hold", res.LockHold))
	return res, nil
}

// validateRound checks a round's input before anything acts on it.
func (s *Store) validateRound(ps []*PreparedMerge) error {
	if len(ps) == 0 || len(ps) > MaxRoundShards {
		return invalidf("a round commits 1 to %d prepared merges, not %d", MaxRoundShards, len(ps))
	}
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if err := s.validatePrepared(p); err != nil {
			return err
		}
		if seen[p.Shard] {
			return invalidf("shard %s appears twice in one round", p.Shard)
		}
		seen[p.Shard] = true
	}
	return nil
}

// publishRound classifies each merge against the latest base, claims the open ones and
// publishes them in one version, rebasing on every lost race. It fills each shard's
// Outcome and BaseVersion; the included ones end committed, the rest already committed or
// stale.
func (s *Store) publishRound(ctx context.Context, ps []*PreparedMerge, res *RoundCommitResult) error {
	base, err := s.loadBase(ctx)
	if err != nil {
		return err
	}
	// 1. What the watermarks already say. Committed ranges need only their clean-up; open
	// ones need their staged files, checked before claiming so that a shard whose files are
	// gone is never claimed "commit" (its Abort can then claim "abort" and finish).
	var open []int
	for i, p := range ps {
		if s.classifyRoundShard(base, p, &res.Shards[i]) {
			open = append(open, i)
		}
	}
	if err := s.dropMissingStaged(ctx, ps, open, res); err != nil {
		return err
	}
	open = stillOpen(open, res)

	// 2. Claim each open attempt.
	// INVARIANT: an attempt is claimed "commit" before a version that publishes it is
	// written, and exactly one of "commit" and "abort" can be claimed, so a round never
	// publishes files an abort deleted.
	if err := s.claimRound(ctx, ps, open, res); err != nil {
		return err
	}
	open = stillOpen(open, res)

	// 3. One version for all of them. A lost race rebases: merges only append runs and
	// move their own shards' watermarks, so the draft is rebuilt from the newer version
	// with the shards it left open.
	for attempt := 0; attempt < 128; attempt++ {
		if len(open) == 0 {
			return nil
		}
		included := make([]*PreparedMerge, len(open))
		for j, i := range open {
			included[j] = ps[i]
		}
		next := base.withMerges(included)
		hold, err := s.publishBaseThenSwap(ctx, next)
		if err == nil {
			res.LockHold += hold
			s.observeLock(hold)
			res.BaseVersion, res.Runs = next.Version, len(next.Runs)
			for _, i := range open {
				res.Shards[i].Outcome, res.Shards[i].BaseVersion = RoundCommitted, next.Version
			}
			return nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			// Possibly landed ("written but told failed"): a retry finds the watermarks.
			return err
		}
		backoff(ctx, attempt)
		if base, err = s.loadBase(ctx); err != nil {
			return err
		}
		var still []int
		for _, i := range open {
			res.Shards[i].Outcome = ""
			if s.classifyRoundShard(base, ps[i], &res.Shards[i]) {
				still = append(still, i)
			}
		}
		open = still
	}
	return fmt.Errorf("%s: round commit kept losing races: %w", s.target, ErrConflict)
}

// classifyRoundShard records what base's watermark says about p and reports whether p is
// still open (to be published).
func (s *Store) classifyRoundShard(base *baseManifest, p *PreparedMerge, sr *RoundShardResult) bool {
	wm := base.Watermarks[p.Shard]
	switch watermarkCoverage(wm, p.Generations[0], p.Through) {
	case rangeCommitted:
		sr.Outcome, sr.BaseVersion = RoundAlreadyCommitted, base.Version
		return false
	case rangeOverlapped:
		sr.Outcome = RoundStale
		sr.Reason = fmt.Sprintf("watermark %d inside prepared range %d..%d", wm, p.Generations[0], p.Through)
		return false
	}
	return true
}

// dropMissingStaged marks stale the open merges whose staged files are gone.
func (s *Store) dropMissingStaged(ctx context.Context, ps []*PreparedMerge, open []int, res *RoundCommitResult) error {
	return s.eachShard(ctx, open, func(ctx context.Context, i int) error {
		for _, f := range ps[i].Staged {
			ok, err := s.db.bucket.Exists(ctx, f.Path)
			if err != nil {
				return err
			}
			if !ok {
				res.Shards[i].Outcome = RoundStale
				res.Shards[i].Reason = fmt.Sprintf("staged file %s is missing", f.Path)
				return nil
			}
		}
		return nil
	})
}

// claimRound claims "commit" for each open merge; one whose attempt was claimed "abort"
// first is stale.
func (s *Store) claimRound(ctx context.Context, ps []*PreparedMerge, open []int, res *RoundCommitResult) error {
	return s.eachShard(ctx, open, func(ctx context.Context, i int) error {
		state, err := s.claim(ctx, ps[i], "commit")
		if err != nil {
			return err
		}
		if state != "commit" {
			res.Shards[i].Outcome = RoundStale
			res.Shards[i].Reason = fmt.Sprintf("attempt %s was aborted", ps[i].AttemptKey)
		}
		return nil
	})
}

// stillOpen keeps the indexes whose outcome is not decided yet.
func stillOpen(open []int, res *RoundCommitResult) []int {
	var out []int
	for _, i := range open {
		if res.Shards[i].Outcome == "" {
			out = append(out, i)
		}
	}
	return out
}

// cleanUpRound drains and cleans up every shard whose rows the base holds, concurrently
// across shards, as Commit does for one: drain exactly the merged generations, delete their
// files, delete a losing attempt's unreferenced staged files, drop the claim. The first
// error is returned once every shard has been tried, so one shard's failure does not leave
// the others undrained.
//
// REQUIRES: for every shard whose outcome is committed or already_committed, a published
// base version's watermark covers its range (publishRound).
func (s *Store) cleanUpRound(ctx context.Context, ps []*PreparedMerge, res *RoundCommitResult) error {
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
		if err := s.cleanUpCommitted(ctx, ps[i], &res.Shards[i], runs); err != nil {
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

// cleanUpCommitted is Commit's part after the publish, for one shard of a round.
//
// REQUIRES: a published base version's watermark for p.Shard is at least p.Through.
func (s *Store) cleanUpCommitted(ctx context.Context, p *PreparedMerge, sr *RoundShardResult, runs int) error {
	var err error
	sr.Reclaimed, sr.Deleted, err = s.finishCommitted(ctx, p, sr.Outcome == RoundAlreadyCommitted, runs)
	return err
}

// eachShard runs fn for the indexes idx, roundCleanupConcurrency at a time; fn writes only
// its own index's result. The first error cancels the rest and is returned.
func (s *Store) eachShard(ctx context.Context, idx []int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(roundCleanupConcurrency)
	for _, i := range idx {
		g.Go(func() error { return fn(gctx, i) })
	}
	return g.Wait()
}
