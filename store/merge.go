package store

import (
	"context"
	"errors"
	"time"
)

// MergeOnce prepares and commits one pass of shard ("" = own shard) in this process.
// It returns a zero result when nothing is pending.
func (s *Store) MergeOnce(ctx context.Context, shard string) (CommitResult, error) {
	p, err := s.Prepare(ctx, PrepareParams{Shard: shard})
	if err != nil || p == nil {
		return CommitResult{}, err
	}
	res, err := s.Commit(ctx, p)
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
			progress = progress || res.Reclaimed > 0
		}
		if !progress {
			return total, nil
		}
	}
}

func (s *Store) observePhase(phase string, start time.Time) {
	if m := s.db.opts.Metrics; m != nil {
		m.MergePhaseSeconds.WithLabelValues(phase).Observe(time.Since(start).Seconds())
	}
}

func (s *Store) countMerge(result string, reclaimed int) {
	if m := s.db.opts.Metrics; m != nil {
		m.MergeTotal.WithLabelValues(string(s.target.Kind), result).Inc()
		if reclaimed > 0 {
			m.GenerationsReclaimed.WithLabelValues(string(s.target.Kind)).Add(float64(reclaimed))
		}
	}
}
