package store

import (
	"context"
	"fmt"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Abort, the other way out of a prepared attempt: claim "abort", then delete the staged files
// once no commit of the attempt can publish them; a late commit sees the claim and reports the
// shard stale. It takes no lock.
func (s *Store) Abort(ctx context.Context, p *PreparedMerge) (AbortResult, error) {
	if err := s.validatePrepared(p); err != nil {
		return AbortResult{}, err
	}
	state, err := s.claimAttempt(ctx, p.AttemptKey, p.Shard, p.Through, "abort")
	if err != nil {
		return AbortResult{}, err
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return AbortResult{}, err
	}
	for _, f := range p.Staged {
		if baseKeeps(base, f.Path) {
			// Published (and maybe quarantined since), so no claim is needed any more: see
			// dropClaim.
			return AbortResult{CommitPresent: true}, s.dropClaim(ctx, p)
		}
	}
	cov := manifest.WatermarkCoverage(base.Watermarks[p.Shard], p.Generations[0], p.Through)
	// INVARIANT: staged files are deleted only when no commit of the attempt can publish
	// them. Once the watermark reaches into the prepared range, none can (CommitRound
	// answers already committed or stale), so its files are garbage whatever the claim
	// says. Below the range, only an abort claim proves it.
	if cov == manifest.RangeOpen && state == "commit" {
		return AbortResult{}, fmt.Errorf("attempt %s has started committing; not deleting its files: %w", p.AttemptKey, ErrConflict)
	}
	// Committed, yet no staged file of this attempt is referenced: another attempt's run
	// published the range (or a compaction folded this one's since, see dropUnreferencedStaged).
	res := AbortResult{CommitPresent: cov == manifest.RangeCommitted, CommittedByAnother: cov == manifest.RangeCommitted}
	for _, f := range p.Staged {
		if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
			return res, err
		}
		res.Deleted++
	}
	s.countMerge("aborted", 0)
	if cov != manifest.RangeOpen {
		// The abort claim only has to stop a late commit, and none can publish any more.
		return res, s.dropClaim(ctx, p)
	}
	return res, nil
}
