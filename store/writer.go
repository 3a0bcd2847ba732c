package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"
)

// AppendResult reports one durable append.
type AppendResult struct {
	Rows int `json:"appended"`
	// WALPosition is the WAL object that made the rows durable.
	WALPosition uint64 `json:"wal_position"`
	// Generation is set when the append was sealed before returning (seal-on-append).
	Generation uint64 `json:"generation,omitempty"`
}

// FlushResult reports one seal.
type FlushResult struct {
	Sealed     bool   `json:"sealed"`
	Generation uint64 `json:"generation,omitempty"`
	Rows       int    `json:"rows"`
	// Pending is the number of generations the shard lists after the seal.
	Pending int `json:"pending"`
}

// Append makes rows durable in this process's shard WAL before it returns. Concurrent
// appends are group-committed into one WAL object. Rows later in rows are newer than
// earlier ones (their write sequences increase). With seal-on-append the rows are also
// sealed into a generation, so every reader sees them when Append returns.
func (s *Store) Append(ctx context.Context, rows []Row) (AppendResult, error) {
	if len(rows) == 0 {
		return AppendResult{}, nil
	}
	for i := range rows {
		if rows[i].Key == "" {
			return AppendResult{}, invalidf("row %d: empty key", i)
		}
		if len(rows[i].Values) != len(s.meta.Schema.Fields) {
			return AppendResult{}, invalidf("row %d: %d values, schema has %d fields", i, len(rows[i].Values), len(s.meta.Schema.Fields))
		}
	}
	return s.submit(ctx, rows, false)
}

// Delete writes a tombstone for key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if key == "" {
		return invalidf("empty key")
	}
	row := Row{Key: key, Values: make([]any, len(s.meta.Schema.Fields))}
	row.Values[s.keyField()] = key
	_, err := s.submit(ctx, []Row{row}, true)
	return err
}

func (s *Store) keyField() int {
	for i, f := range s.meta.Schema.Fields {
		if f.Name == s.meta.Key {
			return i
		}
	}
	return 0
}

func (s *Store) submit(ctx context.Context, rows []Row, deleted bool) (AppendResult, error) {
	start := time.Now()
	// One retry on a fresh writer: a fence means another process claimed our shard, and
	// reclaiming it (fencing that process) is what a restarted owner must do.
	for attempt := 0; ; attempt++ {
		w, err := s.writer(ctx)
		if err != nil {
			return AppendResult{}, err
		}
		req := &appendReq{rows: rows, deleted: deleted, done: make(chan appendDone, 1)}
		select {
		case w.reqs <- req:
		case <-w.stopped:
			if attempt == 0 {
				continue
			}
			return AppendResult{}, ErrClosed
		case <-ctx.Done():
			return AppendResult{}, ctx.Err()
		}
		// The committer always answers: the WAL write may already be under way, so an
		// abandoned request could still become durable; waiting keeps the answer truthful.
		d := <-req.done
		if errors.Is(d.err, ErrFenced) && attempt == 0 {
			continue
		}
		if d.err == nil && s.db.opts.Metrics != nil {
			s.db.opts.Metrics.AppendRows.WithLabelValues(string(s.target.Kind)).Add(float64(len(rows)))
			s.db.opts.Metrics.AppendSeconds.Observe(time.Since(start).Seconds())
		}
		return d.res, d.err
	}
}

// Flush seals the memtable into a generation listed in the shard manifest.
func (s *Store) Flush(ctx context.Context) (FlushResult, error) {
	w := s.residentWriter()
	if w == nil {
		// A process that never wrote may still own unsealed WAL (it crashed before).
		objs, err := s.db.bucket.List(ctx, walPrefix(s.target, s.db.shard))
		if err != nil {
			return FlushResult{}, err
		}
		if len(objs) == 0 {
			return FlushResult{}, nil
		}
		if w, err = s.writer(ctx); err != nil {
			return FlushResult{}, err
		}
	}
	res, err := w.seal(ctx)
	if m := s.db.opts.Metrics; m != nil {
		result := "sealed"
		switch {
		case errors.Is(err, ErrFenced):
			result = "fenced"
		case err != nil:
			result = "failed"
		case !res.Sealed:
			result = "empty"
		}
		m.FlushTotal.WithLabelValues(string(s.target.Kind), result).Inc()
	}
	return res, err
}

type appendReq struct {
	rows    []Row
	deleted bool
	done    chan appendDone
}

type appendDone struct {
	res AppendResult
	err error
}

// memRow is one row version held in a memtable.
type memRow struct {
	row     Row
	seq     int64
	deleted bool
}

// memtable holds rows that are durable in the WAL but not yet sealed.
type memtable struct {
	rows   []memRow
	newest map[string]int // key -> index of the newest version in rows
	maxPos uint64         // highest WAL position whose rows are all in this memtable
	bytes  int64
}

func newMemtable() *memtable { return &memtable{newest: map[string]int{}} }

func (m *memtable) add(r memRow) {
	m.rows = append(m.rows, r)
	m.newest[r.row.Key] = len(m.rows) - 1
	m.bytes += approxRowBytes(r.row)
}

func approxRowBytes(r Row) int64 {
	n := int64(len(r.Key)) + 24
	for _, v := range r.Values {
		switch x := v.(type) {
		case string:
			n += int64(len(x)) + 16
		case []byte:
			n += int64(len(x)) + 24
		default:
			n += 16
		}
	}
	return n
}

// writer owns this process's shard of one store: the WAL committer, the memtable and seals.
type writer struct {
	s     *Store
	shard string
	epoch uint64

	reqs    chan *appendReq
	stop    chan struct{}
	stopped chan struct{}

	sealMu sync.Mutex // one seal at a time

	mu       sync.Mutex
	active   *memtable
	frozen   []*memtable // sealing (or failed to seal); still readable
	manifest *shardManifest
	nextPos  uint64
	lastSeq  int64
	dead     error
}

func (w *writer) alive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead == nil
}

func (w *writer) kill(err error) {
	w.mu.Lock()
	if w.dead == nil {
		w.dead = err
	}
	w.mu.Unlock()
}

// openWriter claims the shard by publishing a manifest with the next writer epoch, replays
// the WAL written after the last seal, and occupies the next WAL position with a fence
// marker so that a previous owner still running fails its next WAL write instead of
// acknowledging rows that nobody would replay.
func openWriter(ctx context.Context, s *Store) (*writer, error) {
	shard := s.db.shard
	var m *shardManifest
	for attempt := 0; ; attempt++ {
		cur, err := s.loadShard(ctx, shard)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			cur = &shardManifest{Shard: shard, NextGeneration: 1}
		}
		next := cur.clone()
		next.Version = cur.Version + 1
		next.WriterEpoch = cur.WriterEpoch + 1
		err = s.publishShard(ctx, next)
		if err == nil {
			m = next
			break
		}
		if !errors.Is(err, ErrAlreadyExists) || attempt > 64 {
			return nil, err
		}
		backoff(ctx, attempt)
	}
	w := &writer{
		s:        s,
		shard:    shard,
		epoch:    m.WriterEpoch,
		reqs:     make(chan *appendReq, 1024),
		stop:     make(chan struct{}),
		stopped:  make(chan struct{}),
		active:   newMemtable(),
		manifest: m,
		lastSeq:  m.MaxSeq,
	}
	objs, err := s.db.bucket.List(ctx, walPrefix(s.target, shard))
	if err != nil {
		return nil, err
	}
	var positions []uint64
	for _, o := range objs {
		if pos, ok := parseWALPos(o.Key); ok {
			positions = append(positions, pos)
		}
	}
	sort.Slice(positions, func(i, j int) bool { return positions[i] < positions[j] })
	next := m.ReplayAfter + 1
	for _, pos := range positions {
		if pos <= m.ReplayAfter {
			continue // sealed already; garbage left by a crash before WAL clean-up
		}
		if err := w.replay(ctx, pos); err != nil {
			return nil, err
		}
		next = pos + 1
	}
	marker, err := encodeIPC(s.codec.ArrowSchema())
	if err != nil {
		return nil, err
	}
	marker = frameWAL(marker)
	for {
		err := s.db.bucket.PutIfAbsent(ctx, walKey(s.target, shard, next), marker)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return nil, err
		}
		// The previous owner wrote here after our listing: its rows were acknowledged, keep them.
		if err := w.replay(ctx, next); err != nil {
			return nil, err
		}
		next++
	}
	w.active.maxPos = next
	w.nextPos = next + 1
	if n := len(w.active.rows); n > 0 {
		s.db.log.Info("replayed unsealed WAL", zap.String("target", s.target.String()), zap.String("shard", shard), zap.Int("rows", n))
	}
	go w.run()
	return w, nil
}

func (w *writer) replay(ctx context.Context, pos uint64) error {
	key := walKey(w.s.target, w.shard, pos)
	data, err := w.s.db.bucket.Get(ctx, key)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("WAL %s/%s/%d (%s)", w.s.target, w.shard, pos, key)
	data, err = unframeWAL(data, what)
	if err != nil {
		w.s.countCorrupt(err)
		return err
	}
	recs, err := decodeIPC(data, w.s.codec, what)
	if err != nil {
		w.s.countCorrupt(err)
		return err
	}
	defer releaseAll(recs)
	for _, rec := range recs {
		view, err := w.s.codec.View(rec)
		if err != nil {
			w.s.countCorrupt(err)
			return err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			row, err := w.s.codec.RowAt(rec, i)
			if err != nil {
				w.s.countCorrupt(err)
				return err
			}
			seq := view.Seq(i)
			w.active.add(memRow{row: row, seq: seq, deleted: view.Deleted(i)})
			if seq > w.lastSeq {
				w.lastSeq = seq
			}
		}
	}
	w.active.maxPos = pos
	return nil
}

// run is the group committer: it writes everything queued since the last WAL write as one
// WAL object, so concurrent appenders share one object write instead of one each.
func (w *writer) run() {
	defer close(w.stopped)
	for {
		var first *appendReq
		select {
		case first = <-w.reqs:
		case <-w.stop:
			w.failQueued(ErrClosed)
			return
		}
		batch := []*appendReq{first}
		n := len(first.rows)
		if wait := w.s.db.opts.GroupCommitWait; wait > 0 {
			t := time.NewTimer(wait)
		linger:
			for n < w.s.db.opts.GroupCommitMaxRows {
				select {
				case r := <-w.reqs:
					batch = append(batch, r)
					n += len(r.rows)
				case <-t.C:
					break linger
				}
			}
			t.Stop()
		}
	drain:
		for n < w.s.db.opts.GroupCommitMaxRows {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
				n += len(r.rows)
			default:
				break drain
			}
		}
		w.commit(batch)
	}
}

func (w *writer) failQueued(err error) {
	for {
		select {
		case r := <-w.reqs:
			r.done <- appendDone{err: err}
		default:
			return
		}
	}
}

// nextSeq is a hybrid logical clock: wall-clock nanoseconds, strictly increasing per shard.
func (w *writer) nextSeq() int64 {
	now := w.s.db.opts.Now().UnixNano()
	if now <= w.lastSeq {
		now = w.lastSeq + 1
	}
	w.lastSeq = now
	return now
}

func (w *writer) commit(batch []*appendReq) {
	ctx := context.Background()
	answer := func(res AppendResult, err error) {
		for _, r := range batch {
			rr := res
			rr.Rows = len(r.rows)
			r.done <- appendDone{res: rr, err: err}
		}
	}
	w.mu.Lock()
	dead := w.dead
	pos := w.nextPos
	var rows []Row
	var seqs []int64
	var deleted []bool
	for _, r := range batch {
		for _, row := range r.rows {
			rows = append(rows, row)
			seqs = append(seqs, w.nextSeq())
			deleted = append(deleted, r.deleted)
		}
	}
	w.mu.Unlock()
	if dead != nil {
		answer(AppendResult{}, dead)
		return
	}
	rec, err := w.s.codec.Build(memory.DefaultAllocator, rows, seqs, w.shard, deleted)
	if err != nil {
		answer(AppendResult{}, err)
		return
	}
	data, err := encodeIPC(w.s.codec.ArrowSchema(), rec)
	rec.Release()
	if err != nil {
		answer(AppendResult{}, err)
		return
	}
	data = frameWAL(data)
	key := walKey(w.s.target, w.shard, pos)
	err = w.s.db.bucket.PutIfAbsent(ctx, key, data)
	if errors.Is(err, ErrAlreadyExists) {
		// Either our own write landed but reported failure on an earlier try (same bytes),
		// or another process claimed the shard and took this position: we are fenced.
		if got, gerr := w.s.db.bucket.Get(ctx, key); gerr == nil && bytes.Equal(got, data) {
			err = nil
		} else {
			w.kill(fmt.Errorf("shard %s of %s: WAL position %d taken by a newer writer: %w", w.shard, w.s.target, pos, ErrFenced))
			answer(AppendResult{}, ErrFenced)
			return
		}
	}
	if err != nil {
		answer(AppendResult{}, fmt.Errorf("write WAL %s: %w", key, err))
		return
	}
	// The position may have been free only because the new owner already sealed and
	// deleted it: check the epoch before acknowledging. A claim after this check lists the
	// WAL after our write, and our position is above its replay point, so it replays us.
	if cur, err := w.s.loadShard(ctx, w.shard); err != nil || cur == nil || cur.WriterEpoch != w.epoch {
		if err == nil {
			err = fmt.Errorf("shard %s of %s claimed by another writer: %w", w.shard, w.s.target, ErrFenced)
			w.kill(err)
		}
		answer(AppendResult{}, err)
		return
	}
	if m := w.s.db.opts.Metrics; m != nil {
		m.WALObjects.Inc()
	}
	w.mu.Lock()
	w.nextPos = pos + 1
	for i := range rows {
		w.active.add(memRow{row: rows[i], seq: seqs[i], deleted: deleted[i]})
	}
	w.active.maxPos = pos
	big := w.active.bytes > memtableSealBytes
	w.mu.Unlock()

	res := AppendResult{WALPosition: pos}
	if w.s.meta.SealOnAppend {
		fr, err := w.seal(ctx)
		if err != nil {
			// The rows are durable (WAL) and visible here, but not yet to other readers.
			answer(res, fmt.Errorf("append durable but not sealed: %w", err))
			return
		}
		res.Generation = fr.Generation
	} else if big {
		go func() { _, _ = w.seal(context.Background()) }()
	}
	answer(res, nil)
}

// memtableSealBytes seals a memtable early so that a missing flush interval cannot grow
// it without bound.
const memtableSealBytes = 64 << 20

// seal turns everything in the memtable into one generation listed in the shard manifest.
func (w *writer) seal(ctx context.Context) (FlushResult, error) {
	w.sealMu.Lock()
	defer w.sealMu.Unlock()

	w.mu.Lock()
	if w.dead != nil {
		err := w.dead
		w.mu.Unlock()
		return FlushResult{}, err
	}
	if len(w.active.rows) > 0 || w.active.maxPos > w.manifest.ReplayAfter {
		w.frozen = append(w.frozen, w.active)
		w.active = newMemtable()
	}
	frozen := append([]*memtable(nil), w.frozen...)
	pendingNow := len(w.manifest.Flushed)
	w.mu.Unlock()

	var maxPos uint64
	merged := newMemtable()
	for _, mt := range frozen {
		for _, r := range mt.rows {
			merged.add(r)
		}
		maxPos = max(maxPos, mt.maxPos)
	}
	if len(merged.rows) == 0 {
		if len(frozen) > 0 && maxPos > w.manifest.ReplayAfter {
			// Only fence markers or empty WAL: advance the replay point without a generation.
			m, err := w.publishSeal(ctx, nil, maxPos)
			if err != nil {
				return FlushResult{}, err
			}
			w.finishSeal(len(frozen), m)
			return FlushResult{Pending: len(m.Flushed)}, nil
		}
		return FlushResult{Pending: pendingNow}, nil
	}
	rows, seqs, deleted := merged.newestSorted()
	rec, err := w.s.codec.Build(memory.DefaultAllocator, rows, seqs, w.shard, deleted)
	if err != nil {
		return FlushResult{}, err
	}
	size := recordBytes(rec)
	data, err := encodeIPC(w.s.codec.ArrowSchema(), rec)
	rec.Release()
	if err != nil {
		return FlushResult{}, err
	}
	minSeq, maxSeq := seqs[0], seqs[0]
	for _, q := range seqs {
		minSeq, maxSeq = min(minSeq, q), max(maxSeq, q)
	}
	gm := genMeta{
		Rows: int64(len(rows)), Bytes: size,
		MinKey: rows[0].Key, MaxKey: rows[len(rows)-1].Key,
		MinSeq: minSeq, MaxSeq: maxSeq,
		Checksum: checksumOf(data),
	}
	m, err := w.publishSeal(ctx, &sealedGen{meta: gm, data: data}, maxPos)
	if err != nil {
		return FlushResult{}, err
	}
	w.finishSeal(len(frozen), m)
	last := m.Flushed[len(m.Flushed)-1]
	return FlushResult{Sealed: true, Generation: last.Gen, Rows: len(rows), Pending: len(m.Flushed)}, nil
}

type sealedGen struct {
	meta genMeta
	data []byte
}

// publishSeal writes the generation file and then the manifest version that lists it
// (the object written last makes it live). It refuses if another writer claimed the shard.
func (w *writer) publishSeal(ctx context.Context, g *sealedGen, replayAfter uint64) (*shardManifest, error) {
	written := ""
	for attempt := 0; attempt < 64; attempt++ {
		cur, err := w.s.loadShard(ctx, w.shard)
		if err != nil {
			return nil, err
		}
		if cur == nil || cur.WriterEpoch != w.epoch {
			err := fmt.Errorf("shard %s of %s claimed by another writer: %w", w.shard, w.s.target, ErrFenced)
			w.kill(err)
			if written != "" {
				_ = w.s.db.bucket.Delete(ctx, written)
			}
			return nil, err
		}
		next := cur.clone()
		next.Version = cur.Version + 1
		next.ReplayAfter = max(cur.ReplayAfter, replayAfter)
		if g != nil {
			gm := g.meta
			gm.Gen = cur.NextGeneration
			gm.Path = genKey(w.s.target, w.shard, gm.Gen, w.epoch)
			gm.SealedAt = w.s.db.opts.Now().UTC()
			if written != gm.Path {
				if err := w.s.db.bucket.Put(ctx, gm.Path, g.data); err != nil {
					return nil, fmt.Errorf("write generation %s: %w", gm.Path, err)
				}
				written = gm.Path
			}
			next.Flushed = append(next.Flushed, gm)
			next.NextGeneration = gm.Gen + 1
			next.MaxSeq = max(next.MaxSeq, gm.MaxSeq)
		}
		err = w.s.publishShard(ctx, next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return nil, err
		}
		backoff(ctx, attempt)
	}
	return nil, fmt.Errorf("seal %s/%s: %w", w.s.target, w.shard, ErrConflict)
}

// finishSeal forgets the sealed memtables and deletes the WAL objects the new manifest
// made garbage (only after that manifest is published).
func (w *writer) finishSeal(nFrozen int, m *shardManifest) {
	w.mu.Lock()
	w.frozen = w.frozen[nFrozen:]
	w.manifest = m
	w.mu.Unlock()
	ctx := context.Background()
	objs, err := w.s.db.bucket.List(ctx, walPrefix(w.s.target, w.shard))
	if err != nil {
		return
	}
	for _, o := range objs {
		if pos, ok := parseWALPos(o.Key); ok && pos <= m.ReplayAfter {
			_ = w.s.db.bucket.Delete(ctx, o.Key)
		}
	}
}

// newestSorted returns the newest version of every key, sorted by key.
func (m *memtable) newestSorted() ([]Row, []int64, []bool) {
	keys := make([]string, 0, len(m.newest))
	for k := range m.newest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([]Row, len(keys))
	seqs := make([]int64, len(keys))
	deleted := make([]bool, len(keys))
	for i, k := range keys {
		r := m.rows[m.newest[k]]
		rows[i], seqs[i], deleted[i] = r.row, r.seq, r.deleted
	}
	return rows, seqs, deleted
}

// snapshot returns the newest local version of every key across frozen and active
// memtables (for reads in this process).
func (w *writer) snapshot() map[string]memRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]memRow{}
	for _, mt := range append(append([]*memtable(nil), w.frozen...), w.active) {
		for k, i := range mt.newest {
			r := mt.rows[i]
			if old, ok := out[k]; !ok || r.seq > old.seq {
				out[k] = r
			}
		}
	}
	return out
}

func (w *writer) pendingGenerations() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.manifest.Flushed)
}

// close seals the memtable and stops the committer.
func (w *writer) close(ctx context.Context) error {
	_, err := w.seal(ctx)
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
	w.kill(ErrClosed)
	if errors.Is(err, ErrFenced) {
		return nil
	}
	return err
}

// observe adopts a newer manifest published by a merge's drain.
func (w *writer) observe(m *shardManifest) {
	w.mu.Lock()
	if m != nil && m.Version > w.manifest.Version {
		w.manifest = m
	}
	w.mu.Unlock()
}
