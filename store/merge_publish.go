package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The publish phase of a merge: CommitRound publishes the prepared merges of 1 to
// MaxRoundShards shards in one base version, then hands over to the finish phase
// (merge_finish.go); docs/FORMAT.md §5, step 2, says why a round covers many shards.

// MaxRoundShards caps the prepared merges one CommitRound takes, so that the round's input
// stays under the 256 KiB payload budget whatever its keys and paths (TestRoundInputSize).
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
	// the caller aborts it and prepares the shard again.
	RoundStale = "stale"
)

// roundFinishTimeout bounds a round's claims and publish, and then its finish, which do not
// end with the caller's context.
const roundFinishTimeout = 2 * time.Minute

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

// Err is nil unless the shard is stale; then it is an ErrStalePreparation that says why,
// for callers that commit one shard and treat a stale one as a failure.
func (r RoundShardResult) Err() error {
	if r.Outcome != RoundStale {
		return nil
	}
	return fmt.Errorf("shard %s through %d: %s: %w", r.Shard, r.Through, r.Reason, ErrStalePreparation)
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
	// AbandonedStaged counts the staged runs of terminated, cancelled or reset-away merges
	// this round found unpublishable and deleted (collectAbandonedStaged).
	AbandonedStaged int `json:"abandoned_staged,omitempty"`
	// SettledClaims counts the attempt claims of the round's committed shards that their
	// watermark made meaningless and this round deleted (collectSettledClaims).
	SettledClaims int `json:"settled_claims,omitempty"`
}

// CommitRound publishes the still-open prepared merges of ps (distinct shards of this store,
// at most MaxRoundShards, else ErrInvalidInput) in one base version, then drains each shard
// and deletes what the version made garbage. A stale shard is left out without blocking the
// others. After an error a retry goes on where it stopped (the claims say "commit"), so
// committing twice is safe.
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
	// Repair of each shard.
	// They run even when ctx ends meanwhile, for the reason the claims do (publishRound).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundFinishTimeout)
	defer cancel()
	if err := s.finishRound(ctx, ps, &res); err != nil {
		return res, fmt.Errorf("round committed (base version %d) but clean-up failed: %w", res.BaseVersion, err)
	}
	counts := map[string]int{}
	var moved []string
	for _, sr := range res.Shards {
		counts[sr.Outcome]++
		if sr.Outcome == RoundCommitted {
			moved = append(moved, sr.Shard)
		}
	}
	if len(moved) > 0 {
		// Best effort: the round is committed whatever these find; the next round retries.
		n, err := s.collectAbandonedStaged(ctx, ps)
		res.AbandonedStaged = n
		if err != nil {
			s.db.log.Warn("collecting abandoned staged runs failed", zap.String("target", s.target.String()), zap.Error(err))
		}
		n, err = s.collectSettledClaims(ctx, moved)
		res.SettledClaims = n
		if err != nil {
			s.db.log.Warn("collecting settled attempt claims failed", zap.String("target", s.target.String()), zap.Error(err))
		}
	}
	s.db.log.Info("merge round committed", zap.String("target", s.target.String()),
		zap.Int("shards", len(ps)), zap.Int("committed", counts[RoundCommitted]),
		zap.Int("already_committed", counts[RoundAlreadyCommitted]), zap.Int("stale", counts[RoundStale]),
		zap.Uint64("base_version", res.BaseVersion), zap.Duration("lock_hold", res.LockHold),
		zap.Int("abandoned_staged", res.AbandonedStaged), zap.Int("settled_claims", res.SettledClaims))
	return res, nil
}

// publishRound classifies each merge against the latest base, claims the open ones and
// publishes them in one version, rebasing on every lost race.
//
// REQUIRES: mergeLock not held by the caller.
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
		if classifyShard(base, p, &res.Shards[i]) {
			open = append(open, i)
		}
	}
	if err := s.dropMissingStaged(ctx, ps, open, res); err != nil {
		return err
	}
	open = stillOpen(open, res)

	// 2. Claim each open attempt.
	// INVARIANT: an attempt is claimed "commit" before a version that publishes it is
	// written, and exactly one of "commit" and "abort" can be claimed, so a commit never
	// publishes files an abort deleted.
	// From the first claim on only this commit or its retry can publish the attempt, and a
	// stopped workflow retries nothing, so the claims and the publish outlive ctx.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundFinishTimeout)
	defer cancel()
	if err := s.claimRound(ctx, ps, open, res); err != nil {
		return err
	}
	open = stillOpen(open, res)

	// 3. One version for all of them; the put-if-absent of v+1 arbitrates between
	// committers, and a lost race rebuilds the draft from the newer version (merges only
	// append runs and move their own shards' watermarks).
	for attempt := 0; attempt < 128; attempt++ {
		if len(open) == 0 {
			return nil
		}
		included := make([]*PreparedMerge, len(open))
		for j, i := range open {
			included[j] = ps[i]
		}
		next := withMerges(base, included)
		hold, err := s.publishBaseThenSwap(ctx, next)
		if err == nil {
			res.LockHold += hold
			s.db.metrics.CommitLockSeconds.Observe(hold.Seconds())
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
		for _, i := range open {
			classifyShard(base, ps[i], &res.Shards[i])
		}
		open = stillOpen(open, res)
	}
	return fmt.Errorf("%s: round commit kept losing races: %w", s.target, ErrConflict)
}

// classifyShard records what base's watermark says about p and reports whether p is still
// open (to be published).
func classifyShard(base *manifest.Base, p *PreparedMerge, sr *RoundShardResult) bool {
	wm := base.Watermarks[p.Shard]
	switch manifest.WatermarkCoverage(wm, p.Generations[0], p.Through) {
	case manifest.RangeCommitted:
		sr.Outcome, sr.BaseVersion = RoundAlreadyCommitted, base.Version
		return false
	case manifest.RangeOverlapped:
		sr.Outcome = RoundStale
		sr.Reason = fmt.Sprintf("watermark %d inside prepared range %d..%d", wm, p.Generations[0], p.Through)
		return false
	}
	return true
}

// dropMissingStaged marks stale the open merges whose staged files are gone.
//
// INVARIANT: a base version is published only after every file it references is written
// (the commit object last); a merge whose staged run is missing is never included.
func (s *Store) dropMissingStaged(ctx context.Context, ps []*PreparedMerge, open []int, res *RoundCommitResult) error {
	return eachShard(ctx, s, "shard step", open, func(ctx context.Context, i int) error {
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

// stillOpen keeps the indexes whose outcome is not decided yet.
func stillOpen(open []int, res *RoundCommitResult) []int {
	return slices.DeleteFunc(open, func(i int) bool { return res.Shards[i].Outcome != "" })
}

// publishBaseThenSwap publishes next with put-if-absent and only then, holding the merge lock
// exclusively, swaps this process's cached latest base to it, so the hold is O(1) whatever
// the merge's size or the storage's latency; it returns how long the lock was held
// (ErrAlreadyExists: lost the race, lock not taken); docs/FORMAT.md, "Commit lock", says why
// publishing first is safe.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) publishBaseThenSwap(ctx context.Context, next *manifest.Base) (time.Duration, error) {
	raw, err := s.encodeBase(next)
	if err != nil {
		return 0, err
	}
	// INVARIANT: the commit object is durable before anything in memory says it exists.
	if err := s.base.put(ctx, next.Version, raw); err != nil {
		return 0, err
	}
	s.mergeLock.Lock()
	locked := time.Now()
	s.base.advance(next.Version, raw, next)
	hold := time.Since(locked)
	s.mergeLock.Unlock()
	s.base.collectEvery(ctx, next.Version)
	return hold, nil
}
