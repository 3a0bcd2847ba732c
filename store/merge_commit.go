package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Commit and Abort, the second phase of the merge protocol (doc.go): claim the attempt,
// publish the base version that makes the staged run live, drain the shard, then delete what
// the publish made garbage. Abort is the other way out of a prepared attempt.

// validatePrepared checks a PreparedMerge that crossed a process boundary before anything
// acts on it: bad input is ErrInvalidInput and writes nothing.
func (s *Store) validatePrepared(p *PreparedMerge) error {
	if p == nil {
		return invalidf("nil prepared merge")
	}
	if p.Target != s.target.String() {
		return invalidf("prepared merge is for %s, not %s", p.Target, s.target)
	}
	if err := validateShardID(p.Shard); err != nil {
		return err
	}
	if len(p.Generations) == 0 || p.Generations[len(p.Generations)-1] != p.Through {
		return invalidf("prepared merge lists no generations or a wrong through")
	}
	if p.Through > maxCounter {
		return invalidf("prepared merge through %d is out of range", p.Through) // a watermark no reader would accept
	}
	for i := 1; i < len(p.Generations); i++ {
		if p.Generations[i] <= p.Generations[i-1] {
			return invalidf("prepared generations are not ascending")
		}
	}
	if p.AttemptKey == "" || len(p.Staged) == 0 {
		return invalidf("prepared merge has no attempt key or no staged files")
	}
	prefix := path.Join(storePrefix(s.target), dataDir) + "/"
	for _, f := range p.Staged {
		if !strings.HasPrefix(f.Path, prefix) || strings.Contains(f.Path, "..") || !strings.HasSuffix(f.Path, ".parquet") {
			return invalidf("staged file %q is outside %s", f.Path, prefix)
		}
		if f.Checksum == "" || f.Bytes < 0 || f.Rows < 0 {
			return invalidf("staged file %q has no checksum or a negative size", f.Path) // no reader would accept the run
		}
	}
	return nil
}

// claimKey is the object key of p's attempt claim.
func (s *Store) claimKey(p *PreparedMerge) string {
	return claimObjectKey(s.target, p.Shard, hashKey(p.AttemptKey, fmt.Sprint(p.Through)))
}

// claim validates p and records state ("commit" or "abort") for the attempt. It returns
// the state that holds afterwards: ours, or the one another caller claimed first.
func (s *Store) claim(ctx context.Context, p *PreparedMerge, state string) (string, error) {
	if err := s.validatePrepared(p); err != nil {
		return "", err
	}
	raw, _ := json.Marshal(attemptClaim{State: state, AttemptKey: p.AttemptKey, Through: p.Through, At: s.db.opts.Now().UTC()})
	err := s.db.bucket.PutIfAbsent(ctx, s.claimKey(p), raw)
	if err == nil {
		return state, nil
	}
	if !errors.Is(err, ErrAlreadyExists) {
		return "", err
	}
	got, err := s.db.bucket.Get(ctx, s.claimKey(p))
	if err != nil {
		return "", err
	}
	var c attemptClaim
	if err := decodeJSONObject(got, &c, "attempt claim"); err != nil {
		return "", err
	}
	return c.State, nil
}

// Commit publishes a prepared merge: base version v+1 = runs + staged files with the
// shard's watermark set to Through. The manifest read, the checks and the conditional write
// of the next base manifest run before the merge lock is taken, which is then held only to
// swap the cached latest base (publishBaseThenSwap); the drain and deletes run after it.
// Committing twice is safe: a watermark already at Through means "done".
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Commit(ctx context.Context, p *PreparedMerge) (CommitResult, error) {
	// INVARIANT: an attempt is claimed before it publishes, and exactly one of "commit" and
	// "abort" can be claimed, so a commit never publishes files an abort deleted.
	state, err := s.claim(ctx, p, "commit")
	if err != nil {
		return CommitResult{}, err
	}
	if state != "commit" {
		s.countMerge("aborted", 0)
		return CommitResult{}, fmt.Errorf("attempt %s was aborted: %w", p.AttemptKey, ErrStalePreparation)
	}
	commitStart := time.Now()
	res, err := s.publishMerge(ctx, p)
	s.observePhase("commit", commitStart)
	if err != nil {
		if errors.Is(err, ErrStalePreparation) {
			s.countMerge("stale", 0)
		} else {
			s.countMerge("failed", 0)
		}
		return res, err
	}

	// INVARIANT: the drain and the deletes run only after the base version that makes them
	// garbage is published; a crash in between is repaired by the next prepare (reconcile).
	reclaimed, deleted, err := s.finishCommitted(ctx, p, res.AlreadyCommitted, res.Runs)
	res.Reclaimed, res.Deleted = reclaimed, deleted
	if err != nil {
		// The base already holds the rows; a retry takes the already-committed path and
		// finishes, and the next prepare reconciles the drain anyway.
		return res, fmt.Errorf("committed base version %d but %w", res.BaseVersion, err)
	}
	s.db.log.Info("merge committed", zap.String("target", s.target.String()), zap.String("shard", p.Shard),
		zap.Uint64("through", p.Through), zap.Int("reclaimed", reclaimed), zap.Uint64("base_version", res.BaseVersion),
		zap.Bool("already_committed", res.AlreadyCommitted), zap.Duration("lock_hold", res.LockHold))
	return res, nil
}

// publishMerge is the metadata step of Commit: read, check, publish v+1, then swap under the lock.
func (s *Store) publishMerge(ctx context.Context, p *PreparedMerge) (CommitResult, error) {
	// INVARIANT: the commit object is written last: the staged files it references exist
	// before the base version that references them is published.
	for _, f := range p.Staged {
		ok, err := s.db.bucket.Exists(ctx, f.Path)
		if err != nil {
			return CommitResult{}, err
		}
		if !ok {
			base, err := s.loadBase(ctx)
			if err == nil && base.Watermarks[p.Shard] >= p.Through {
				break // committed earlier and the run was compacted away since
			}
			return CommitResult{}, fmt.Errorf("staged file %s is missing: %w", f.Path, ErrStalePreparation)
		}
	}
	// Everything runs outside the lock: the put-if-absent of version v+1 is what arbitrates
	// between committers (other processes never see this lock anyway), and a committer that
	// lost the race rebases. The lock covers only the in-memory swap after the write.
	var res CommitResult
	for attempt := 0; attempt < 128; attempt++ {
		base, err := s.loadBase(ctx)
		if err != nil {
			return res, err
		}
		switch watermarkCoverage(base.Watermarks[p.Shard], p.Generations[0], p.Through) {
		case rangeCommitted:
			res.BaseVersion, res.AlreadyCommitted = base.Version, true
			return res, nil
		case rangeOverlapped:
			return res, fmt.Errorf("%s shard %s: watermark %d inside prepared range %d..%d: %w",
				s.target, p.Shard, base.Watermarks[p.Shard], p.Generations[0], p.Through, ErrStalePreparation)
		}
		next := base.withMerge(p)
		hold, err := s.publishBaseThenSwap(ctx, next)
		res.LockHold += hold
		if err == nil {
			res.BaseVersion, res.Runs = next.Version, len(next.Runs)
			s.observeLock(res.LockHold)
			return res, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return res, err
		}
		// Another committer (another shard, another process) won v+1: merges only append
		// runs, so rebase onto the new version and try again.
		backoff(ctx, attempt)
	}
	return res, fmt.Errorf("%s: base commit kept losing races: %w", s.target, ErrConflict)
}

// publishBaseThenSwap publishes next with put-if-absent and then, holding the merge lock
// exclusively, swaps this process's cached latest base to it; it returns how long the lock
// was held. The encoding and the durable write both run before the lock is taken, so the
// hold is O(1): independent of the merge's size, of the manifest's size and of the
// storage's latency (a file:// fsync, an S3 round trip). ErrAlreadyExists = lost the race;
// the lock is then not taken at all. (Not a ...Locked function: it takes the lock.)
//
// Why publishing before the lock is safe (docs/FORMAT.md, "Commit lock"): no reader takes
// the lock (reads are snapshot reads, shard manifests before the base), and a Prepare of
// this process that plans between the durable write and the swap sees at worst the
// situation a Prepare in another process always could: a range the new watermark covers,
// which its own commit then reports as already committed or stale.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) publishBaseThenSwap(ctx context.Context, next *baseManifest) (time.Duration, error) {
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
	s.collectBase(ctx, next.Version)
	return hold, nil
}

func (s *Store) observeLock(d time.Duration) {
	if m := s.db.opts.Metrics; m != nil {
		m.CommitLockSeconds.Observe(d.Seconds())
	}
}

// finishCommitted is everything that follows the publish of p's run, for one shard, in
// Commit and in CommitRound alike: drain exactly p's generations, delete their files, clean
// up the shard's demand records (afterMergeDemand, with runs the base's run count after the
// publish, 0 when already committed), delete
// p's staged files if another attempt's run holds the rows (alreadyCommitted and
// unreferenced), and drop the claim, which the watermark makes meaningless. A failed claim
// delete is returned so the caller's retry, which takes the already-committed path, deletes
// it; a failed generation delete is left for the next pass.
//
// REQUIRES: a published base version's watermark for p.Shard is at least p.Through.
func (s *Store) finishCommitted(ctx context.Context, p *PreparedMerge, alreadyCommitted bool, runs int) (reclaimed, deleted int, err error) {
	drainStart := time.Now()
	reclaimed, err = s.drain(ctx, p.Shard, p.Generations)
	s.observePhase("drain", drainStart)
	if err != nil {
		s.countMerge("failed", 0)
		return 0, 0, fmt.Errorf("drain failed: %w", err)
	}
	deleteStart := time.Now()
	deleted, _ = s.deleteMergedGenerations(ctx, p.Shard, p.Through)
	s.afterMergeDemand(ctx, p.Shard, p.Through, runs)
	s.observePhase("delete", deleteStart)
	if alreadyCommitted {
		if err := s.dropUnreferencedStaged(ctx, p); err != nil {
			return reclaimed, deleted, err
		}
		s.countMerge("already_committed", reclaimed)
	} else {
		s.countMerge("merged", reclaimed)
	}
	if err := s.dropClaim(ctx, p); err != nil {
		return reclaimed, deleted, fmt.Errorf("claim clean-up failed: %w", err)
	}
	return reclaimed, deleted, nil
}

// mergeDeleteConcurrency bounds the concurrent deletes of merged generation files.
const mergeDeleteConcurrency = 8

// drain removes exactly gens from the shard manifest: a relative edit re-applied on every
// lost race, never "set the list to empty", so a seal that lands meanwhile is kept.
//
// REQUIRES: gens are at or below shard's watermark in a published base version.
func (s *Store) drain(ctx context.Context, shard string, gens []uint64) (int, error) {
	drop := make(map[uint64]bool, len(gens))
	for _, g := range gens {
		drop[g] = true
	}
	removed := 0
	m, err := s.editShard(ctx, shard, func(m *shardManifest) (bool, error) {
		keep := m.Flushed[:0:0]
		for _, g := range m.Flushed {
			if !drop[g.Gen] {
				keep = append(keep, g)
			}
		}
		removed = len(m.Flushed) - len(keep)
		m.Flushed = keep
		return removed > 0, nil
	})
	if err != nil {
		return 0, err
	}
	if w := s.residentWriter(); w != nil && w.shard == shard {
		w.observe(m)
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
	// of files actually deleted; the rest are left for the next pass, as before.
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeDeleteConcurrency)
	for _, f := range files {
		if f.gen > through || listed[f.key] {
			continue
		}
		g.Go(func() error {
			if err := s.db.bucket.Delete(gctx, f.key); err != nil {
				return err
			}
			s.db.cache.forget(f.key)
			n.Add(1)
			return nil
		})
	}
	err = g.Wait()
	return int(n.Load()), err
}

// dropUnreferencedStaged deletes an attempt's staged files when the latest base does not
// reference them (another attempt committed the same generations first).
//
// REQUIRES: the watermark covers p's range (rangeCommitted), so no commit of p can
// publish them any more.
func (s *Store) dropUnreferencedStaged(ctx context.Context, p *PreparedMerge) error {
	base, err := s.loadBase(ctx)
	if err != nil {
		return err
	}
	for _, f := range p.Staged {
		if !base.references(f.Path) {
			if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

// Abort deletes exactly the staged files of an attempt whose commit is proven absent. The
// abort claim makes the proof stick: a late commit of the same attempt sees it and
// refuses, so files are never deleted under a manifest that references them.
func (s *Store) Abort(ctx context.Context, p *PreparedMerge) (AbortResult, error) {
	state, err := s.claim(ctx, p, "abort")
	if err != nil {
		return AbortResult{}, err
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return AbortResult{}, err
	}
	for _, f := range p.Staged {
		if base.references(f.Path) {
			// Published, so no claim is needed any more: see dropClaim.
			return AbortResult{CommitPresent: true}, s.dropClaim(ctx, p)
		}
	}
	cov := watermarkCoverage(base.Watermarks[p.Shard], p.Generations[0], p.Through)
	// INVARIANT: staged files are deleted only when no commit of the attempt can publish
	// them. Once the watermark reaches into the prepared range, none can (Commit answers
	// "already committed" or StalePreparation), so its files are garbage whatever the claim
	// says. Below the range, only an abort claim proves it.
	if cov == rangeOpen && state == "commit" {
		return AbortResult{}, fmt.Errorf("attempt %s has started committing; not deleting its files: %w", p.AttemptKey, ErrConflict)
	}
	res := AbortResult{CommitPresent: cov == rangeCommitted}
	for _, f := range p.Staged {
		if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
			return res, err
		}
		res.Deleted++
	}
	s.countMerge("aborted", 0)
	if cov != rangeOpen {
		// The abort claim only has to stop a late commit, and none can publish any more.
		return res, s.dropClaim(ctx, p)
	}
	return res, nil
}

// dropClaim deletes the attempt's claim once the shard's watermark has reached the
// attempt's first generation: from then on every Commit of the attempt answers "already
// committed" or StalePreparation from the watermark alone and no Abort can delete a file a
// manifest references, so the claim protects nothing. Claims of attempts aborted below the
// watermark stay: they are what stops a late commit.
func (s *Store) dropClaim(ctx context.Context, p *PreparedMerge) error {
	if err := s.db.bucket.Delete(ctx, s.claimKey(p)); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
