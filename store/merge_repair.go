package store

import "context"

// Repair, the step before a prepare: a crash between a commit's publish and its finish leaves
// covered generations listed, their files and demand records, which Repair drains and deletes
// under mergeLock shared.

// RepairParams selects the shard Repair repairs.
type RepairParams struct {
	// Shard to repair; "" means this process's own shard.
	Shard string
}

// RepairResult reports one Repair.
type RepairResult struct {
	// Drained is the number of covered generations removed from the shard manifest.
	Drained int `json:"drained"`
	// Deleted is the number of merged generation files deleted.
	Deleted int `json:"deleted"`
}

// Repair drains the shard's generations at or below its base watermark, deletes their files
// and the shard's stale and orphan demand records; idempotent. Callers run it before Prepare.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Repair(ctx context.Context, p RepairParams) (RepairResult, error) {
	shard, err := s.mergeShard(p.Shard)
	if err != nil {
		return RepairResult{}, err
	}
	// Shared, like Prepare: a concurrent publish of this process only raises the watermark,
	// and draining below an older one is still a drain of merged generations.
	s.mergeLock.RLock()
	defer s.mergeLock.RUnlock()

	sm, err := s.loadShard(ctx, shard)
	if err != nil || sm == nil {
		return RepairResult{}, err
	}
	base, err := s.loadBase(ctx) // after sm, as cleanDemand requires
	if err != nil {
		return RepairResult{}, err
	}
	wm := base.Watermarks[shard]
	// Best effort: a stale or orphan demand record costs at most a needless MergeWal start,
	// and the next Repair or the demand reconcile retries. One listing of the shard's demand
	// prefix, bounded by its pending generations.
	if objs, err := s.db.bucket.List(ctx, demandShardPrefix(s.target, shard)); err == nil {
		_, _ = s.cleanDemand(ctx, shard, sm, wm, false, objs)
	}
	covered := sm.CoveredBy(wm)
	if len(covered) == 0 {
		return RepairResult{}, nil
	}
	var res RepairResult
	// INVARIANT: only generations the published watermark covers are drained and deleted.
	if res.Drained, err = s.drain(ctx, shard, covered); err != nil {
		return res, err
	}
	res.Deleted, err = s.deleteMergedGenerations(ctx, shard, wm)
	return res, err
}
