package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// compactionPlan is what one compaction pass rewrites (pebble's pickedCompaction for the
// base table): a set of runs, and whether tombstones may be dropped.
type compactionPlan struct {
	inputs []manifest.Run
	// allRuns: the inputs are every run of the base and none is quarantined, so no older
	// version of a key can hide in a run the pass does not read (a quarantined run may be
	// released, release.go).
	allRuns bool
	// minPendingSeq is the smallest write sequence of any pending generation, or of any row
	// not sealed yet (unsealedSeqBound), or that a WAL write still in flight may carry
	// (settledSeqBound): a tombstone older than it shadows no row that a merge could still
	// bring into the base.
	minPendingSeq int64
}

// walAckWindow is how long after its rows are sequenced a WAL write may land and still be
// acknowledged (walGroupCommit); clockSkewAllowance is how far the clocks of the writers and
// of the compacting process may disagree. Together they bound the sequence a write in flight,
// which no listing sees yet, can still acknowledge.
const (
	walAckWindow       = 10 * time.Minute
	clockSkewAllowance = 5 * time.Minute
)

// settledSeqBound is the oldest write sequence a WAL write not yet visible at now may still
// acknowledge: an acknowledged write landed within walAckWindow of its sequence, so one that
// no listing after now sees either is not acknowledged or carries a newer sequence.
//
// REQUIRES: now is read before the pass lists the store's shards and their WALs: a shard
// claimed or a write landed after that is seen by none of its reads.
func settledSeqBound(now time.Time) int64 {
	return now.Add(-walAckWindow - clockSkewAllowance).UnixNano()
}

// dropsTombstone reports whether the pass may drop a surviving tombstone of write sequence
// seq: only when the pass rewrites every run and no pending generation could hold an older
// version of the key.
//
// INVARIANT: a dropped tombstone shadows nothing anywhere, so dropping it resurrects no row.
func (p compactionPlan) dropsTombstone(seq int64) bool {
	return p.allRuns && seq < p.minPendingSeq
}

// planCompaction picks the runs one pass rewrites, smallest first (they buy the most read
// amplification per byte), at most maxRuns and through the run that reaches maxBytes (either
// not positive = no cap, as CompactParams' -1); the plan is empty when fewer than two runs
// qualify. Pure.
func planCompaction(base *manifest.Base, pending map[string][]manifest.Gen, maxRuns int, maxBytes int64) compactionPlan {
	sorted := slices.Clone(base.Runs)
	slices.SortStableFunc(sorted, func(a, b manifest.Run) int { return cmp.Or(cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.ID, b.ID)) })
	var inputs []manifest.Run
	var bytes int64
	for _, r := range sorted {
		if maxRuns > 0 && len(inputs) >= maxRuns {
			break
		}
		if maxBytes > 0 && bytes >= maxBytes && len(inputs) >= 2 {
			break
		}
		inputs = append(inputs, r)
		bytes += r.Bytes
	}
	if len(inputs) < 2 {
		return compactionPlan{}
	}
	p := compactionPlan{inputs: inputs, allRuns: len(inputs) == len(base.Runs) && len(base.Quarantined) == 0, minPendingSeq: int64(1<<63 - 1)}
	for _, gens := range pending {
		for _, g := range gens {
			p.minPendingSeq = min(p.minPendingSeq, g.MinSeq)
		}
	}
	return p
}

// compactionFootprint is the reservation of a pass over inputs before it reads them: their
// bytes, a guessed reader window per run (compactRunGuess) and the output window.
func compactionFootprint(inputs []manifest.Run) int64 {
	n := int64(compactOutputWindow)
	for _, r := range inputs {
		// Capped, sizes a manifest declares near 2^63 cannot wrap the sum negative; the
		// budget clamps the reservation to its limit anyway.
		n = min(n+min(max(r.Bytes, 0), maxReadBufferRequest)+compactRunGuess(r), math.MaxInt64/2)
	}
	return n
}

// compactionMaxBytes caps a pass's input bytes so that its footprint fits the budget's
// limit: half of what the output window leaves, at least a quarter of the limit. A pass that
// overshoots by its last run takes the whole budget and runs alone, or fails ErrBudgetBusy.
func compactionMaxBytes(maxBytes, limit int64) int64 {
	if limit <= 0 {
		return maxBytes
	}
	c := max((limit-compactOutputWindow)/2, limit/4, 1)
	if maxBytes == 0 || maxBytes > c {
		return c
	}
	return maxBytes
}

// CompactParams bounds one compaction pass.
type CompactParams struct {
	// MaxRuns is the most runs rewritten per pass: default 16, at least 2, -1 for no cap.
	MaxRuns int
	// MaxBytes is the most input bytes rewritten per pass; the merge budget caps it, and
	// 0 is that cap (no cap without a budget).
	MaxBytes int64
}

// CompactResult reports one compaction pass.
type CompactResult struct {
	BaseVersion    uint64 `json:"base_version"`
	InputRuns      int    `json:"input_runs"`
	OutputRuns     int    `json:"output_runs"`
	RowsIn         int64  `json:"rows_in"`
	RowsOut        int64  `json:"rows_out"`
	DroppedDeletes int64  `json:"dropped_deletes"`
	RunsLeft       int    `json:"runs_left"`
	Committed      bool   `json:"committed"`
	// AbandonedOutputs counts the outputs of earlier passes that never published and that
	// this pass deleted (collectAbandonedOutputs).
	AbandonedOutputs int `json:"abandoned_outputs,omitempty"`
}

// CompactBase rewrites a bounded set of base runs into one run, dropping shadowed rows and,
// by the tombstone rule (dropsTombstone), tombstones. The commit succeeds only if every input
// run is still in the latest manifest; runs merges appended meanwhile are kept.
func (s *Store) CompactBase(ctx context.Context, p CompactParams) (CompactResult, error) {
	p.MaxRuns = cmp.Or(p.MaxRuns, 16)
	if p.MaxRuns < 2 && p.MaxRuns != -1 {
		return CompactResult{}, invalidf("max runs must be at least 2")
	}
	if p.MaxBytes < 0 {
		return CompactResult{}, invalidf("max bytes must not be negative")
	}
	now := s.db.opts.Now() // settledSeqBound's: before the snapshot lists the shards
	snap, err := s.snapshot(ctx, false)
	if err != nil {
		return CompactResult{}, err
	}
	base := snap.base
	budget := s.db.opts.Budget
	plan := planCompaction(base, snap.pending, p.MaxRuns, compactionMaxBytes(p.MaxBytes, budget.Limit()))
	if plan.allRuns {
		plan.minPendingSeq = min(plan.minPendingSeq, settledSeqBound(now))
		if plan.minPendingSeq, err = s.unsealedSeqBound(ctx, snap, plan.minPendingSeq); err != nil {
			return CompactResult{}, err
		}
	}
	inputs := plan.inputs
	res := CompactResult{BaseVersion: base.Version, RunsLeft: len(base.Runs)}
	if inputs == nil {
		s.db.metrics.CompactTotal.WithLabelValues("noop").Inc()
		res.AbandonedOutputs = s.collectAbandonedOutputsBestEffort(ctx, base)
		return res, s.clearCompactDemand(ctx, len(base.Runs))
	}
	// Reserved in the one waiting call before the pass holds anything (docs/DESIGN.md §3).
	resv, err := s.reserveMerge(ctx, compactionFootprint(inputs))
	if err != nil {
		return res, err
	}
	defer resv.Release()
	result := "failed" // what the pass counts however it returns from here
	defer func() { s.db.metrics.CompactTotal.WithLabelValues(result).Inc() }()
	acct := newMemAccount(resv, budget)
	ins, freeInputs, err := s.readCompactInputs(ctx, acct, inputs)
	defer freeInputs()
	if err != nil {
		return res, err
	}
	// The footers bound what the batches and pages can take: the pass holds that or fails
	// now, before decoding, rather than overdraw (growth rule: grow without waiting or fail).
	if need := compactNeed(ins); need > resv.Bytes() && !resv.TryGrow(need) {
		return res, fmt.Errorf("%s: compaction of %d runs needs %d bytes, reserved %d of a budget of %d: %w",
			s.target, len(inputs), need, resv.Bytes(), budget.Limit(), ErrBudgetBusy)
	}
	res.InputRuns = len(inputs)
	id := compactRunID()
	out := &manifest.Run{ID: id, Path: dataKey(s.target, id), Source: "compact"}
	written := s.db.opts.Now() // before the put: a backend may date the object from its start
	var co compactOutput
	out.Bytes, err = s.db.bucket.PutFrom(ctx, out.Path, func(w io.Writer) error {
		cw, sum := newChecksumWriter(w) // fresh per call: the sum is of the bytes that were stored
		var err error
		co, err = s.writeCompacted(ctx, acct, cw, ins, plan)
		out.Checksum = sum()
		return err
	})
	if err != nil {
		s.countCorrupt("compaction of "+s.target.String(), err) // a batch that decodes wrong only now, past the inputs' checks; which input is not known
		cctx, cancel := compactCleanupContext(ctx)
		s.dropCompactOutput(cctx, out.Path)
		cancel()
		return res, fmt.Errorf("write compacted run: %w", err)
	}
	freeInputs() // the inputs' bytes go back to the pool before the commit's I/O
	res.RowsIn, res.RowsOut, res.DroppedDeletes = co.rowsIn, co.run.Rows, co.dropped
	out.Rows, out.MinKey, out.MaxKey = co.run.Rows, co.run.MinKey, co.run.MaxKey
	out.MinSeq, out.MaxSeq, out.Deletes = co.run.MinSeq, co.run.MaxSeq, co.run.Deletes
	if co.run.Rows == 0 {
		cctx, cancel := compactCleanupContext(ctx)
		_ = s.db.bucket.Delete(cctx, out.Path) // every row was a droppable tombstone
		cancel()
		out = nil
	} else {
		res.OutputRuns = 1
	}

	committed, latest, err := s.publishCompaction(ctx, inputs, out, written)
	// What follows the publish is its clean-up: it runs even when the pass's context ended
	// meanwhile (its CompactBase cancelled or terminated), which would delete nothing.
	ctx, cancel := compactCleanupContext(ctx)
	defer cancel()
	if err != nil || !committed {
		if out != nil {
			s.dropCompactOutput(ctx, out.Path)
		}
		if err == nil {
			result = "inputs_changed"
		}
		return res, err
	}
	res.Committed, res.BaseVersion, res.RunsLeft = true, latest.Version, len(latest.Runs)
	_ = s.clearCompactDemand(ctx, res.RunsLeft) // a stale marker costs one needless CompactBase start
	res.AbandonedOutputs = s.collectAbandonedOutputsBestEffort(ctx, latest)
	// INVARIANT: the inputs are deleted only after the manifest replacing them is published.
	for _, r := range inputs {
		_ = s.db.bucket.Delete(ctx, r.Path)
		s.db.cache.forget(r.Path)
	}
	result = "committed"
	s.db.log.Info("base compacted", zap.String("target", s.target.String()), zap.Int("input_runs", len(inputs)),
		zap.Int64("rows_in", res.RowsIn), zap.Int64("rows_out", res.RowsOut), zap.Uint64("base_version", res.BaseVersion))
	return res, nil
}

// unsealedSeqBound lowers bound to the smallest write sequence a row no generation of the
// snapshot holds may have: a shard with unsealed rows (a memtable, or a dead writer's WAL),
// or whose manifest moved on since the snapshot, bounds it at its max_seq + 1. A shard that
// could not lower the bound is not listed.
func (s *Store) unsealedSeqBound(ctx context.Context, snap *readSnapshot, bound int64) (int64, error) {
	for _, sh := range snap.shards {
		m := snap.manifests[sh]
		if m.MaxSeq+1 >= bound {
			continue
		}
		positions, err := s.db.listWAL(ctx, s.target, sh)
		if err != nil {
			return 0, err
		}
		if slices.ContainsFunc(positions, func(pos uint64) bool { return pos > m.ReplayAfter }) {
			bound = m.MaxSeq + 1
			continue
		}
		// Read after the listing: a seal publishes before it deletes, so a seal that took
		// rows the listing missed shows here.
		cur, err := s.loadShard(ctx, sh)
		if err != nil {
			return 0, err
		}
		if cur != nil && cur.Version != m.Version {
			bound = m.MaxSeq + 1
		}
	}
	return bound, nil
}

// compactCleanupTimeout bounds a pass's clean-up after its publish or its failed write.
const compactCleanupTimeout = time.Minute

// compactCleanupContext is ctx without its cancellation, for at most compactCleanupTimeout:
// a pass whose context ended around its publish must still delete its output or its inputs,
// which no later collection may reach for a day, if ever.
func compactCleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), compactCleanupTimeout)
}

// dropCompactOutput deletes a pass's output unless the latest base lists it (a publish
// reported failed may have landed; an unreadable base leaves it for collectAbandonedOutputs).
// The name is this execution's alone, so no one else can publish it meanwhile.
func (s *Store) dropCompactOutput(ctx context.Context, path string) {
	base, err := s.loadBase(ctx)
	if err != nil || base.References(path) {
		return
	}
	_ = s.db.bucket.Delete(ctx, path)
}

// publishCompaction replaces inputs by out in the latest manifest, provided every input is
// still there, and returns whether this pass is committed and the latest base it knows (nil
// on error). It holds the merge lock exclusively for the whole read-check-publish loop, so no
// prepare of this process plans against a base being replaced.
//
// REQUIRES: mergeLock not held by the caller.
// INVARIANT: out is published within compactPublishWindow of written, the time its put began,
// or never, so the collector may delete an unlisted output older than compactOrphanAge.
func (s *Store) publishCompaction(ctx context.Context, inputs []manifest.Run, out *manifest.Run, written time.Time) (bool, *manifest.Base, error) {
	s.mergeLock.Lock()
	locked := time.Now()
	defer func() {
		s.db.metrics.CommitLockSeconds.Observe(time.Since(locked).Seconds())
		s.mergeLock.Unlock()
	}()
	for attempt := 0; attempt < 128; attempt++ {
		base, err := s.loadBase(ctx)
		if err != nil {
			return false, nil, err
		}
		next, ok := base.WithCompaction(inputs, out)
		if !ok {
			// Our own version may be what took the inputs: its write landed though it was
			// reported failed (AlreadyExists on the retried put). The output's name is this
			// execution's, so a base that lists it and none of the inputs holds this pass.
			if out != nil && base.References(out.Path) && !slices.ContainsFunc(inputs, func(r manifest.Run) bool { return base.References(r.Path) }) {
				return true, base, nil
			}
			return false, base, nil
		}
		if out != nil {
			if age := s.db.opts.Now().Sub(written); age > compactPublishWindow {
				return false, nil, fmt.Errorf("%s: compacted run %s was written %s ago, past the %s a pass has to publish it: %w",
					s.target, out.ID, age.Round(time.Second), compactPublishWindow, ErrStalled)
			}
		}
		err = s.publishBase(ctx, next)
		if err == nil {
			return true, next, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return false, nil, err
		}
		backoff(ctx, attempt)
	}
	return false, nil, fmt.Errorf("%s: compaction commit kept losing races: %w", s.target, ErrConflict)
}
