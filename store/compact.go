package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
)

// compactionPlan is what one compaction pass rewrites (pebble's pickedCompaction for the
// base table): a set of runs, and whether tombstones may be dropped.
type compactionPlan struct {
	inputs []runMeta
	// allRuns: the inputs are every run of the base, so no older version of a key can hide
	// in a run the pass does not read.
	allRuns bool
	// minPendingSeq is the smallest write sequence of any pending generation: a tombstone
	// older than it shadows no row that a merge could still bring into the base.
	minPendingSeq int64
}

// dropsTombstone reports whether the pass may drop a surviving tombstone of write sequence
// seq: only when the pass rewrites every run and no pending generation could hold an older
// version of the key.
//
// INVARIANT: a dropped tombstone shadows nothing anywhere, so dropping it resurrects no row.
func (p compactionPlan) dropsTombstone(seq int64) bool {
	return p.allRuns && seq < p.minPendingSeq
}

// planCompaction picks the runs one pass rewrites: the smallest runs first (merges append
// many small runs; folding them buys the most read amplification per byte), at most
// maxRuns (0 = no cap) and stopping after the run that reaches maxBytes (0 = no cap). The
// plan is empty (no inputs) when fewer than two runs would be rewritten. pending is the
// pending generations per shard, for the tombstone rule. Pure: no I/O.
func planCompaction(base *baseManifest, pending map[string][]genMeta, maxRuns int, maxBytes int64) compactionPlan {
	inputs := pickCompactionRuns(base.Runs, maxRuns, maxBytes)
	if inputs == nil {
		return compactionPlan{}
	}
	p := compactionPlan{inputs: inputs, allRuns: len(inputs) == len(base.Runs), minPendingSeq: int64(1<<63 - 1)}
	for _, gens := range pending {
		for _, g := range gens {
			p.minPendingSeq = min(p.minPendingSeq, g.MinSeq)
		}
	}
	return p
}

// pickCompactionRuns is planCompaction's choice of runs; nil when fewer than two.
func pickCompactionRuns(runs []runMeta, maxRuns int, maxBytes int64) []runMeta {
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

// compactFootprintFactor is what a compaction pass holds per byte of input run objects: the
// decoded inputs (a Parquet run decodes to about twice its object at the peak: readCost),
// the merged record (about the inputs) and the encoded output (about the record).
const compactFootprintFactor = 4

// compactionFootprint is the reservation of a pass over inputs (at least 1 byte).
func compactionFootprint(inputs []runMeta) int64 {
	var n int64
	for _, r := range inputs {
		n += r.Bytes
	}
	return max(compactFootprintFactor*n, 1)
}

// compactionMaxBytes caps a pass's input bytes (maxBytes, 0 = no cap) so that its footprint
// fits the budget's limit (0 = unlimited). The planner may still overshoot by the run that
// reaches the cap; such a pass takes the whole budget and runs alone (Budget.Reserve).
func compactionMaxBytes(maxBytes, limit int64) int64 {
	if limit <= 0 {
		return maxBytes
	}
	c := max(limit/compactFootprintFactor, 1)
	if maxBytes == 0 || maxBytes > c {
		return c
	}
	return maxBytes
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
	budget := s.db.opts.Budget
	plan := planCompaction(base, snap.pending, p.MaxRuns, compactionMaxBytes(p.MaxBytes, budget.Limit()))
	inputs := plan.inputs
	res := CompactResult{BaseVersion: base.Version, RunsLeft: len(base.Runs)}
	if inputs == nil {
		s.countCompact("noop")
		return res, s.afterCompactDemand(ctx, len(base.Runs))
	}
	// The pass holds its inputs, the merged record and the encoded run at once: it takes
	// their estimate from the process budget, like a merge, in the one waiting call before
	// it holds anything (docs/DESIGN.md §3; the growth rule of doc.go).
	resv, wait, err := budget.Reserve(ctx, compactionFootprint(inputs))
	if m := s.db.opts.Metrics; m != nil {
		m.BudgetWaitSeconds.Observe(wait.Seconds())
	}
	if err != nil {
		return res, err
	}
	defer resv.Release()
	files := make([]*sortedFile, len(inputs))
	for i, r := range inputs {
		// Not through the cache: the inputs die with this pass, and a cached copy would be
		// memory outside the reservation once it is released.
		f, err := s.privateLoad(ctx, readSource{path: r.Path, checksum: r.Checksum, run: true, bytes: r.Bytes}, nil)
		if err != nil {
			s.countCompact("failed")
			return res, fmt.Errorf("read run %s: %w", r.ID, err)
		}
		files[i] = f
		res.RowsIn += int64(f.n)
	}
	var dropped int64
	picks := mergeSorted(files, func(f *sortedFile, i int) bool {
		if f.view.Deleted(i) && plan.dropsTombstone(f.view.Seq(i)) {
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
		rec := copyRows(nil, s.codec.ArrowSchema(), picks)
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
	// INVARIANT: the inputs are deleted only after the manifest replacing them is published.
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
// is still there. It holds the merge lock exclusively for the whole read-check-publish
// loop, so no prepare of this process plans against a base the compaction is replacing.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) publishCompaction(ctx context.Context, inputs []runMeta, out *runMeta) (bool, uint64, int, error) {
	s.mergeLock.Lock()
	locked := time.Now()
	defer func() {
		s.observeLock(time.Since(locked))
		s.mergeLock.Unlock()
	}()
	for attempt := 0; attempt < 128; attempt++ {
		base, err := s.loadBase(ctx)
		if err != nil {
			return false, 0, 0, err
		}
		next, ok := base.withCompaction(inputs, out)
		if !ok {
			return false, base.Version, len(base.Runs), nil
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
