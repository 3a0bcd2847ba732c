package store

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Collecting abandoned compaction outputs: each execution of a pass writes its own output
// (compactRunID), and what a pass could not delete itself (a crash, a kill, an unreadable
// base) is deleted by later passes once no publish of it can still start (compactOrphanAge).

// compactRunNamePrefix starts every compaction output's name: c-<24 lowercase hex>.parquet.
const compactRunNamePrefix = "c-"

// compactPublishWindow is how long after its put began a pass may still start the publish of
// its output; a later one fails with ErrStalled and deletes the output.
const compactPublishWindow = time.Hour

// compactOrphanAge is how old an unreferenced output must be before a pass deletes it: far past
// compactPublishWindow whatever the clocks' skew.
const compactOrphanAge = 24 * time.Hour

// compactRunID names one execution's output run with 96 random bits.
func compactRunID() string { return compactRunNamePrefix + randomHex() }

// isCompactRunKey reports whether key is a compaction output of t (dataKey of compactRunID).
func isCompactRunKey(t Target, key string) bool {
	return isHashName(dataPrefix(t)+compactRunNamePrefix, key, ".parquet")
}

// errCollectPageFull ends the listing once a pass has its share of candidates.
var errCollectPageFull = errors.New("collect page full")

// collectAbandonedOutputs deletes, at most collectPerRound at a time, the compaction outputs
// of this store that base (the latest the pass knows) neither references nor set aside and
// that are older than compactOrphanAge; it costs one LIST of data/c- and a DELETE per output.
//
// INVARIANT: an output younger than compactOrphanAge is never deleted here: its pass may still
// publish it (publishCompaction's window). A key that is not one of ours is foreign.
func (s *Store) collectAbandonedOutputs(ctx context.Context, base *manifest.Base) (int, error) {
	now := s.db.opts.Now()
	var cands []string
	err := s.db.bucket.Walk(ctx, dataPrefix(s.target)+compactRunNamePrefix, func(o objstore.ObjectInfo) error {
		switch {
		case !isCompactRunKey(s.target, o.Key):
			s.db.foreignObject(foreignCompaction, o.Key) // never deleted: not ours to delete
		case baseKeeps(base, o.Key) || o.ModTime.IsZero() || now.Sub(o.ModTime) < compactOrphanAge: // set aside, it stays for repair; an undated object is never judged old
		default:
			cands = append(cands, o.Key)
			if len(cands) == collectPerRound {
				return errCollectPageFull
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errCollectPageFull) {
		return 0, err
	}
	deleted := 0
	for _, key := range cands {
		if err := s.db.bucket.Delete(ctx, key); err != nil && !errors.Is(err, ErrNotFound) {
			return deleted, err
		}
		s.db.cache.forget(key)
		deleted++
	}
	if deleted > 0 {
		s.db.log.Info("abandoned compaction outputs deleted", zap.String("target", s.target.String()), zap.Int("deleted", deleted))
	}
	return deleted, nil
}

// collectAbandonedOutputsBestEffort is collectAbandonedOutputs for the end of a pass.
func (s *Store) collectAbandonedOutputsBestEffort(ctx context.Context, base *manifest.Base) int {
	n, err := s.collectAbandonedOutputs(ctx, base)
	if err != nil {
		s.db.log.Warn("collecting abandoned compaction outputs failed", zap.String("target", s.target.String()), zap.Error(err))
	}
	return n
}
