package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Seal: the memtables of a writer become one generation file and the shard manifest version
// that lists it; the WAL objects that made its rows durable are deleted after.

// FlushResult reports one seal.
type FlushResult struct {
	Sealed     bool   `json:"sealed"`
	Generation uint64 `json:"generation,omitempty"`
	Rows       int    `json:"rows"`
	// Pending is the number of generations the shard lists after the seal.
	Pending int `json:"pending"`
}

// Flush seals the memtable into a generation listed in the shard manifest.
func (s *Store) Flush(ctx context.Context) (FlushResult, error) {
	w := s.residentWriter()
	if w == nil {
		dead, evicted := s.handle()
		if evicted {
			return FlushResult{}, nil // the eviction sealed it, and no writer took over since
		}
		// An append may have replaced the dead writer since residentWriter looked: only a
		// writer that is dead (for good) may have its committer stopped here.
		if dead != nil && !dead.alive() {
			// A newer owner that replayed the dead writer's WAL seals its rows; a claim
			// here would only fence that owner.
			if handed, err := dead.deadHandedOver(ctx); err != nil || handed {
				return FlushResult{}, err
			}
		}
		// A process that never wrote may still own unsealed WAL (it crashed before).
		positions, err := s.db.listWAL(ctx, s.target, s.db.shard)
		if err != nil {
			return FlushResult{}, err
		}
		if len(positions) == 0 {
			return FlushResult{}, nil
		}
		if w, err = s.writer(ctx); err != nil {
			return FlushResult{}, err
		}
	}
	res, err := w.seal(ctx, false)
	if errors.Is(err, errWriterEvicted) {
		res, err = FlushResult{}, nil // the eviction that retired w sealed what it held
	}
	result := "sealed"
	switch {
	case errors.Is(err, ErrFenced):
		result = "fenced"
	case err != nil:
		result = "failed"
	case !res.Sealed:
		result = "empty"
	}
	s.db.metrics.FlushTotal.WithLabelValues(string(s.target.Kind), result).Inc()
	return res, err
}

// seal turns everything in the memtable into one generation listed in the shard manifest;
// without a generation slot (reserved, admitWrite) a shard at PendingMax is left unsealed.
func (w *writer) seal(ctx context.Context, reserved bool) (FlushResult, error) {
	w.sealMu.Lock()
	defer w.sealMu.Unlock()

	if !reserved && w.atPendingMax() {
		w.refreshManifest(ctx) // merges elsewhere may have made room (refreshManifest)
	}
	w.mu.Lock()
	if w.dead != nil {
		err := w.dead
		w.mu.Unlock()
		return FlushResult{}, err
	}
	// Read what mu guards while holding it: a merge's drain may replace w.manifest
	// (observe) at any time.
	replayAfter := w.manifest.ReplayAfter
	if limit := w.s.db.opts.PendingMax; !reserved && limit > 0 && len(w.manifest.Flushed) >= limit {
		// INVARIANT: a seal never takes the shard above PendingMax, where every read of the
		// store is refused; the rows stay readable here and durable in the WAL until merges
		// drain the shard.
		n := len(w.manifest.Flushed)
		w.mu.Unlock()
		return FlushResult{Pending: n}, nil
	}
	if w.active.len() > 0 || w.active.maxPos > replayAfter {
		w.frozen = append(w.frozen, w.active)
		w.active = newMemtable()
	}
	frozen := append([]*memtable(nil), w.frozen...)
	pendingNow := len(w.manifest.Flushed)
	w.mu.Unlock()

	var maxPos uint64
	for _, mt := range frozen {
		maxPos = max(maxPos, mt.maxPos)
	}
	rows, seqs, deleted := newestRows(frozen)
	if len(rows) == 0 && maxPos <= replayAfter {
		return FlushResult{Pending: pendingNow}, nil
	}
	var g *sealedGen // nil: only fence markers or empty WAL, so the replay point advances alone
	if len(rows) > 0 {
		data, size, err := w.encodeRows(rows, seqs, deleted)
		if err != nil {
			return FlushResult{}, err
		}
		g = &sealedGen{data: data, meta: manifest.Gen{
			Rows: int64(len(rows)), Bytes: size,
			MinKey: rows[0].Key, MaxKey: rows[len(rows)-1].Key,
			MinSeq: slices.Min(seqs), MaxSeq: slices.Max(seqs),
			Checksum: checksumOf(data),
		}}
	}
	m, gen, err := w.publishSeal(ctx, g, maxPos)
	if err != nil {
		return FlushResult{}, err
	}
	w.finishSeal(len(frozen), m)
	return FlushResult{Sealed: g != nil, Generation: gen, Rows: len(rows), Pending: len(m.Flushed)}, nil
}

// encodeRows builds rows as one record of the shard and returns its IPC file and the
// record's decoded size, for the WAL group commit (which frames it) and the seal.
func (w *writer) encodeRows(rows []Row, seqs []int64, deleted []bool) ([]byte, int64, error) {
	rec, err := w.s.codec.Build(memory.DefaultAllocator, rows, seqs, w.shard, deleted)
	if err != nil {
		return nil, 0, err
	}
	defer rec.Release()
	data, err := encodeIPC(w.s.codec.ArrowSchema(), rec)
	return data, recordBytes(rec), err
}

type sealedGen struct {
	meta manifest.Gen
	data []byte
}

// publishSeal writes the generation file, then the manifest version that lists it, and
// returns that version and the generation's number (0 without g); fenced if another writer
// claimed the shard.
func (w *writer) publishSeal(ctx context.Context, g *sealedGen, replayAfter uint64) (*manifest.Shard, uint64, error) {
	written, writtenGen := "", uint64(0)
	// A number whose put an earlier seal started is never reused: that put may have been
	// abandoned and still land over other rows (decision 0631).
	floor := w.genStarted + 1
	for attempt := 0; attempt < 64; attempt++ {
		cur, err := w.s.loadShard(ctx, w.shard)
		if err != nil {
			return nil, 0, err
		}
		if cur == nil || cur.WriterEpoch != w.epoch {
			err := fmt.Errorf("shard %s of %s claimed by another writer: %w", w.shard, w.s.target, ErrFenced)
			w.kill(err)
			// A version told AlreadyExists may have landed (a retried put-if-absent), and the
			// claim after it lists our generation and replays only the WAL after it.
			if written != "" && !listsGeneration(cur, written) {
				_ = w.s.db.bucket.Delete(ctx, written)
			}
			return nil, 0, err
		}
		// Our version may have landed though told AlreadyExists (an SDK retry): it lists our
		// generation, or a merge drained it already and only our seals raise next_generation;
		// publishing again would seal the same rows twice.
		landed := written != "" && (listsGeneration(cur, written) || cur.NextGeneration > writtenGen)
		if (g == nil || landed) && cur.ReplayAfter >= replayAfter {
			return cur, writtenGen, nil
		}
		next := cur.Next()
		next.ReplayAfter = max(cur.ReplayAfter, replayAfter)
		if g != nil && !landed {
			gm := g.meta
			gm.Gen = max(cur.NextGeneration, floor)
			gm.Path = genKey(w.s.target, w.shard, gm.Gen, w.epoch)
			gm.SealedAt = w.s.db.opts.Now().UTC()
			if written != gm.Path {
				w.genStarted = max(w.genStarted, gm.Gen)
				if err := w.s.db.bucket.Put(ctx, gm.Path, g.data); err != nil {
					return nil, 0, fmt.Errorf("write generation %s: %w", gm.Path, err)
				}
				written, writtenGen = gm.Path, gm.Gen
				// The demand record goes after the generation and before the manifest that
				// publishes it, so a crash anywhere in between leaves the generation findable
				// by the sweep (docs/FORMAT.md, demand crash table).
				if err := w.s.putDemand(ctx, w.shard, gm); err != nil {
					return nil, 0, err
				}
			}
			next.Flushed = append(next.Flushed, gm)
			next.NextGeneration = gm.Gen + 1
			next.MaxSeq = max(next.MaxSeq, gm.MaxSeq)
		}
		err = w.s.publishShard(ctx, next)
		if err == nil {
			return next, writtenGen, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return nil, 0, err
		}
		backoff(ctx, attempt)
	}
	return nil, 0, fmt.Errorf("seal %s/%s: %w", w.s.target, w.shard, ErrConflict)
}

// listsGeneration reports whether m lists the generation file at path, pending or set aside.
func listsGeneration(m *manifest.Shard, path string) bool {
	if m == nil {
		return false
	}
	_, quarantined := findQuarantined(m.Quarantined, path)
	return quarantined || slices.ContainsFunc(m.Flushed, func(g manifest.Gen) bool { return g.Path == path })
}

// finishSeal forgets the sealed memtables and deletes the WAL objects the new manifest
// made garbage (only after that manifest is published).
func (w *writer) finishSeal(nFrozen int, m *manifest.Shard) {
	w.mu.Lock()
	w.frozen = w.frozen[nFrozen:]
	w.manifest = m
	w.mu.Unlock()
	ctx := context.Background()
	positions, err := w.s.db.listWAL(ctx, w.s.target, w.shard)
	if err != nil {
		return
	}
	for _, pos := range positions {
		key := walKey(w.s.target, w.shard, pos)
		if _, q := findQuarantined(m.Quarantined, key); pos <= m.ReplayAfter && !q {
			_ = w.s.db.bucket.Delete(ctx, key)
		}
	}
}
