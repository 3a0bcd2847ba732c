package store

import (
	"context"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Repair, the step before a prepare: a crash between a commit's publish and its finish leaves
// covered generations listed, their files, demand records and the attempt's claim, which
// Repair drains and deletes under mergeLock shared. The demand reconcile does the same for
// every shard (finishStopped), since a shard that never seals again is never prepared.

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

// Repair drains the shard's generations at or below its base watermark, deletes their files,
// the attempt claims the watermark settles and the shard's stale and orphan demand records;
// idempotent. Callers run it before Prepare.
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
	return s.finishCovered(ctx, shard, sm, wm)
}

// finishCovered is the finish of a merge of shard that published and never finished: it
// drains the generations sm lists at or below watermark, deletes their files and deletes the
// attempt claims the watermark settles (collectShardClaims). Nothing when sm lists none.
//
// REQUIRES: watermark is shard's in a published base version; mergeLock held shared.
func (s *Store) finishCovered(ctx context.Context, shard string, sm *manifest.Shard, watermark uint64) (RepairResult, error) {
	covered := sm.CoveredBy(watermark)
	if len(covered) == 0 {
		return RepairResult{}, nil
	}
	var res RepairResult
	var err error
	// INVARIANT: only generations the published watermark covers are drained and deleted.
	if res.Drained, err = s.drain(ctx, shard, covered); err != nil {
		return res, err
	}
	if res.Deleted, err = s.deleteMergedGenerations(ctx, shard, watermark); err != nil {
		return res, err
	}
	_, err = s.collectShardClaims(ctx, watermark, shard)
	return res, err
}

// finishStopped finishes, from the demand reconcile, a merge of shard whose base version was
// published and whose finish never ran: a MergeWal stopped in between (Terminate, Cancel, a
// reset away) is not retried, and only a later Prepare of the shard repairs it, which a shard
// whose writer never seals again never gets.
//
// REQUIRES: sm and watermark as for finishCovered; mergeLock not held by the caller.
func (s *Store) finishStopped(ctx context.Context, shard string, sm *manifest.Shard, watermark uint64) error {
	if sm == nil || len(sm.CoveredBy(watermark)) == 0 {
		return nil
	}
	s.mergeLock.RLock()
	defer s.mergeLock.RUnlock()
	res, err := s.finishCovered(ctx, shard, sm, watermark)
	if res.Drained > 0 {
		s.db.log.Info("finished a merge stopped after its publish", zap.String("target", s.target.String()),
			zap.String("shard", shard), zap.Int("drained", res.Drained), zap.Int("deleted", res.Deleted))
	}
	return err
}
