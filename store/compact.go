package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
)

// planCompaction picks the runs one pass rewrites: the smallest runs first (merges append
// many small runs; folding them buys the most read amplification per byte), at most
// maxRuns and stopping after the run that reaches maxBytes. It returns nil when fewer than
// two runs would be rewritten. Pure: no I/O.
func planCompaction(runs []runMeta, maxRuns int, maxBytes int64) []runMeta {
	if len(runs) < 2 {
		return nil
	}
	sorted := append([]runMeta(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Bytes != sorted[j].Bytes {
			return sorted[i].Bytes < sorted[j].Bytes
		}
		return sorted[i].ID < sorted[j].ID
	})
	var out []runMeta
	var bytes int64
	for _, r := range sorted {
		if maxRuns > 0 && len(out) >= maxRuns {
			break
		}
		if maxBytes > 0 && bytes >= maxBytes && len(out) >= 2 {
			break
		}
		out = append(out, r)
		bytes += r.Bytes
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// CompactBase rewrites a bounded set of base runs into one run, dropping shadowed rows.
// Tombstones are dropped only when every run is rewritten and no pending generation could
// hold an older version of the key. The commit succeeds only if every input run is still
// in the latest manifest; runs appended by merges meanwhile are kept.
func (s *Store) CompactBase(ctx context.Context, p CompactParams) (CompactResult, error) {
	if p.MaxRuns == 0 {
		p.MaxRuns = 16
	}
	if p.MaxRuns < 2 && p.MaxRuns != -1 {
		return CompactResult{}, invalidf("max runs must be at least 2")
	}
	if p.MaxRuns == -1 {
		p.MaxRuns = 0
	}
	if p.MaxBytes < 0 {
		return CompactResult{}, invalidf("max bytes must not be negative")
	}
	attempt := p.AttemptKey
	if attempt == "" {
		attempt = randomKey()
	}
	snap, err := s.snapshot(ctx, false)
	if err != nil {
		return CompactResult{}, err
	}
	base := snap.base
	inputs := planCompaction(base.Runs, p.MaxRuns, p.MaxBytes)
	res := CompactResult{BaseVersion: base.Version, RunsLeft: len(base.Runs)}
	if inputs == nil {
		s.countCompact("noop")
		return res, s.afterCompactDemand(ctx, len(base.Runs))
	}
	allRuns := len(inputs) == len(base.Runs)
	minPendingSeq := int64(1<<63 - 1)
	for _, gens := range snap.pending {
		for _, g := range gens {
			minPendingSeq = min(minPendingSeq, g.MinSeq)
		}
	}
	files := make([]*sortedFile, len(inputs))
	for i, r := range inputs {
		f, err := s.loadRun(ctx, r.Path, r.Checksum)
		if err != nil {
			s.countCompact("failed")
			return res, fmt.Errorf("read run %s: %w", r.ID, err)
		}
		files[i] = f
		res.RowsIn += int64(f.n)
	}
	var dropped int64
	picks := mergeSorted(files, func(f *sortedFile, i int) bool {
		if allRuns && f.view.Deleted(i) && f.view.Seq(i) < minPendingSeq {
			dropped++
			return true
		}
		return false
	})
	res.DroppedDeletes = dropped
	res.RowsOut = int64(len(picks))
	res.InputRuns = len(inputs)

	var out *runMeta
	if len(picks) > 0 {
		rec := copyRows(s.codec.ArrowSchema(), picks)
		data, err := encodeParquet(s.codec.ArrowSchema(), rec)
		rec.Release()
		if err != nil {
			return res, err
		}
		id := fmt.Sprintf("c-%s", hashKey(attempt, s.target.String(), fmt.Sprint(base.Version)))
		out = &runMeta{ID: id, Path: dataKey(s.target, id), Rows: int64(len(picks)), Bytes: int64(len(data)),
			MinKey: picks[0].key(), MaxKey: picks[len(picks)-1].key(), MinSeq: picks[0].seq(), MaxSeq: picks[0].seq(), Source: "compact",
			Checksum: checksumOf(data)}
		for _, pk := range picks {
			out.MinSeq, out.MaxSeq = min(out.MinSeq, pk.seq()), max(out.MaxSeq, pk.seq())
			if pk.f.view.Deleted(pk.i) {
				out.Deletes++
			}
		}
		if err := s.db.bucket.Put(ctx, out.Path, data); err != nil {
			return res, err
		}
		res.OutputRuns = 1
	}

	committed, version, left, err := s.publishCompaction(ctx, inputs, out)
	if err != nil || !committed {
		if out != nil {
			_ = s.db.bucket.Delete(ctx, out.Path)
		}
		if err == nil {
			s.countCompact("inputs_changed")
		} else {
			s.countCompact("failed")
		}
		return res, err
	}
	res.Committed, res.BaseVersion, res.RunsLeft = true, version, left
	_ = s.afterCompactDemand(ctx, left) // a stale marker costs one needless CompactBase start
	// The inputs are garbage only now that the manifest replacing them is published.
	for _, r := range inputs {
		_ = s.db.bucket.Delete(ctx, r.Path)
		s.db.cache.forget(r.Path)
	}
	s.countCompact("committed")
	s.db.log.Info("base compacted", zap.String("target", s.target.String()), zap.Int("input_runs", len(inputs)),
		zap.Int64("rows_in", res.RowsIn), zap.Int64("rows_out", res.RowsOut), zap.Uint64("base_version", version))
	return res, nil
}

func (s *Store) countCompact(result string) {
	if m := s.db.opts.Metrics; m != nil {
		m.CompactTotal.WithLabelValues(result).Inc()
	}
}

// publishCompaction replaces inputs by out in the latest manifest, provided every input
// is still there. REQUIRES: mergeLock not held by the caller.
func (s *Store) publishCompaction(ctx context.Context, inputs []runMeta, out *runMeta) (bool, uint64, int, error) {
	s.mergeLock.Lock()
	locked := time.Now()
	defer func() {
		s.observeLock(time.Since(locked))
		s.mergeLock.Unlock()
	}()
	drop := map[string]bool{}
	for _, r := range inputs {
		drop[r.ID] = true
	}
	for attempt := 0; attempt < 128; attempt++ {
		base, err := s.loadBase(ctx)
		if err != nil {
			return false, 0, 0, err
		}
		present := 0
		next := base.clone()
		next.Version = base.Version + 1
		next.Reason = "compact"
		next.Runs = next.Runs[:0]
		for _, r := range base.Runs {
			if drop[r.ID] {
				present++
				continue
			}
			next.Runs = append(next.Runs, r)
		}
		if present != len(inputs) {
			return false, base.Version, len(base.Runs), nil
		}
		if out != nil {
			next.Runs = append(next.Runs, *out)
		}
		err = s.publishBase(ctx, next)
		if err == nil {
			return true, next.Version, len(next.Runs), nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return false, 0, 0, err
		}
		backoff(ctx, attempt)
	}
	return false, 0, 0, fmt.Errorf("%s: compaction commit kept losing races: %w", s.target, ErrConflict)
}
