package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// The write path of one store in this process: Append and Delete hand rows to the shard's
// writer, which owns the shard (claim, replay, fence), makes rows durable with the WAL group
// commit (wal_commit.go), holds them in memtables (memtable.go) and seals them into
// generations (seal.go).

// AppendResult reports one durable append.
type AppendResult struct {
	Rows int `json:"appended"`
	// WALPosition is the WAL object that made the rows durable.
	WALPosition uint64 `json:"wal_position"`
	// Generation is set when the append was sealed before returning (seal-on-append).
	Generation uint64 `json:"generation,omitempty"`
}

// Append makes rows durable in this process's shard WAL before it returns, group-committing
// concurrent appends; later rows are newer. With seal-on-append they are also sealed, so every
// reader sees them on return. Limits: Options.MaxAppendRows and MemtableBytes
// (ErrAppendTooLarge, append_limits.go) and PendingMax (ErrTooManyPending, admitWrite).
func (s *Store) Append(ctx context.Context, rows []Row) (AppendResult, error) {
	if len(rows) == 0 {
		return AppendResult{}, nil
	}
	for i := range rows {
		if rows[i].Key == "" {
			return AppendResult{}, invalidf("row %d: empty key", i)
		}
		if len(rows[i].Key) > MaxKeyBytes {
			return AppendResult{}, rowcodec.CheckRowKey(fmt.Sprintf("row %d: key", i), rows[i].Key)
		}
		if len(rows[i].Values) != len(s.meta.Schema.Fields) {
			return AppendResult{}, invalidf("row %d: %d values, schema has %d fields", i, len(rows[i].Values), len(s.meta.Schema.Fields))
		}
	}
	size := rowcodec.DecodedRowsBytes(rows)
	if err := s.checkAppendSize(len(rows), size); err != nil {
		return AppendResult{}, err
	}
	res, err := s.chargeAppend(ctx, size)
	if err != nil {
		return AppendResult{}, err
	}
	defer res.Release()
	return s.submit(ctx, rows, size, false)
}

// Delete writes a tombstone for key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if key == "" {
		return invalidf("empty key")
	}
	if err := rowcodec.CheckRowKey("key", key); err != nil {
		return err
	}
	row := Row{Key: key, Values: make([]any, len(s.meta.Schema.Fields))}
	row.Values[s.codec.KeyIndex()] = key
	_, err := s.submit(ctx, []Row{row}, rowcodec.DecodedRowsBytes([]Row{row}), true)
	return err
}

// submit hands rows, whose decoded estimate is size, to the WAL group commit.
func (s *Store) submit(ctx context.Context, rows []Row, size int64, deleted bool) (AppendResult, error) {
	start := time.Now()
	// One retry on a fresh writer: a fence means another process claimed our shard, and
	// reclaiming it (fencing that process) is what a restarted owner must do.
	for attempt := 0; ; attempt++ {
		w, unpin, err := s.pinnedWriter(ctx)
		if err != nil {
			return AppendResult{}, err
		}
		d := w.enqueue(ctx, rows, size, deleted)
		unpin()
		if errors.Is(d.err, ErrClosed) && attempt < maxSubmitAttempts {
			continue // the writer stopped (evicted or replaced) before writing it: the next one takes it
		}
		if errors.Is(d.err, ErrFenced) && attempt == 0 {
			continue
		}
		if d.err == nil {
			s.db.metrics.AppendRows.WithLabelValues(string(s.target.Kind)).Add(float64(len(rows)))
			s.db.metrics.AppendSeconds.Observe(time.Since(start).Seconds())
		}
		return d.res, d.err
	}
}

// enqueue queues one append on the WAL committer and waits for its answer: ErrClosed when
// the writer stopped before taking it.
func (w *writer) enqueue(ctx context.Context, rows []Row, size int64, deleted bool) appendDone {
	release, err := w.admit(ctx)
	if err != nil {
		return appendDone{err: err}
	}
	defer release()
	req := &appendReq{rows: rows, bytes: size, deleted: deleted, done: make(chan appendDone, 1)}
	select {
	case w.reqs <- req:
	case <-w.stopped:
		return appendDone{err: ErrClosed}
	case <-ctx.Done():
		return appendDone{err: ctx.Err()}
	}
	return w.await(req)
}

// unsealedFactor bounds the rows a writer holds in memtables to unsealedFactor ×
// MemtableBytes: a memtable being sealed and the next one, more only while seals fail.
const unsealedFactor = 4

// admitWrite refuses a write (ErrTooManyPending) when the shard's pending generations, plus
// those admitted seal-on-append writes may still add, are at PendingMax; check and
// reservation are one step under mu, so concurrent writers cannot all pass a check only one
// fits. It also refuses one (ErrBudgetBusy) while the memtables hold unsealedFactor ×
// MemtableBytes, starting a seal, so a storage that refuses generations but accepts WAL
// objects does not grow memory with every row acknowledged.
func (w *writer) admitWrite() (release func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.admitUnsealedLocked(); err != nil {
		return nil, err
	}
	limit := w.s.db.opts.PendingMax
	if limit <= 0 {
		return func() {}, nil
	}
	pending := len(w.manifest.Flushed) + w.sealSlots
	if pending >= limit {
		return nil, fmt.Errorf("%s: this process's shard %s has %d pending generations (limit %d); retry after merges catch up: %w",
			w.s.target, w.shard, pending, limit, ErrTooManyPending)
	}
	if !w.s.meta.SealOnAppend {
		return func() {}, nil
	}
	w.sealSlots++
	// REQUIRES: release is called once per admission (enqueue defers it, refuseAtPendingMax
	// calls it at once): a second call would free another admission's seal slot.
	return func() {
		w.mu.Lock()
		w.sealSlots--
		w.mu.Unlock()
	}, nil
}

// admit is admitWrite, judged again by the shard's latest manifest when the one this writer
// knows is at PendingMax (refreshManifest): a refused write costs one manifest read.
func (w *writer) admit(ctx context.Context) (release func(), err error) {
	release, err = w.admitWrite()
	if errors.Is(err, ErrTooManyPending) && w.refreshManifest(ctx) {
		release, err = w.admitWrite()
	}
	return release, err
}

// admitUnsealedLocked is admitWrite's bound on the rows held unsealed.
func (w *writer) admitUnsealedLocked() error {
	held, limit := w.active.bytes, unsealedFactor*w.s.db.opts.MemtableBytes
	for _, mt := range w.frozen {
		held += mt.bytes
	}
	if held < limit {
		return nil
	}
	if !w.sizeSealing {
		w.sizeSealing = true
		go w.sealFull()
	}
	return fmt.Errorf("%s: this process's shard %s holds %d bytes of rows its seals have not written yet (limit %d, %d × the memtable bound); retry after a seal succeeds: %w",
		w.s.target, w.shard, held, limit, unsealedFactor, ErrBudgetBusy)
}

// writer owns this process's shard of one store: the WAL group committer, the memtables and
// seals.
type writer struct {
	// Set by openWriter before the writer is shared; immutable after.
	s     *Store
	shard string
	epoch uint64 // the writer epoch this writer claimed the shard with

	reqs     chan *appendReq // appends waiting for the WAL group commit
	stop     chan struct{}   // closed by stopCommitter: the WAL committer exits
	stopOnce sync.Once       // closes stop
	stopped  chan struct{}   // closed by the WAL committer when it has exited

	// sealMu serialises seals, held for the whole seal (I/O included); taken before mu.
	sealMu sync.Mutex
	// genStarted, guarded by sealMu, is the highest generation number whose file put this
	// writer started: a later seal numbers past it, since an abandoned put may still land.
	genStarted uint64

	// mu guards the fields below, held only for in-memory work (...Locked: held by the caller).
	mu sync.Mutex
	// active receives the rows of every WAL group commit.
	active *memtable
	// frozen are memtables being sealed, or whose seal failed; still readable, oldest first.
	frozen []*memtable
	// manifest is the newest shard manifest this writer knows (its seals, merges' drains).
	manifest *manifest.Shard
	// nextPos is the WAL position of the next group commit, advanced by the committer only.
	nextPos uint64
	// lastSeq is the highest write sequence handed out (nextSeqLocked) or replayed.
	lastSeq int64
	// dead, once set, is returned by every later WAL group commit and seal (fenced, closed).
	dead error
	// sealSlots counts admitted seal-on-append writes not yet answered (admitWrite).
	sealSlots int
	// sizeSealing is set while the seal of a memtable that reached MemtableBytes runs.
	sizeSealing bool
	// lastRefresh is when refreshManifest last read the shard's manifest.
	lastRefresh time.Time
	// handedOver, once set, says a newer claim replayed this dead writer's WAL.
	handedOver bool
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
// marker, so a previous owner still running fails its next WAL write instead of acknowledging
// rows nobody would replay. A WAL object an earlier claim could not replay is checked first.
func openWriter(ctx context.Context, s *Store) (*writer, error) {
	shard := s.db.shard
	if err := s.stillDamagedWAL(ctx, shard); err != nil {
		return nil, err
	}
	var m *manifest.Shard
	for attempt := 0; ; attempt++ {
		cur, err := s.loadShard(ctx, shard)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			cur = &manifest.Shard{Shard: shard, NextGeneration: 1}
		}
		next := cur.Next()
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
	positions, err := s.db.listWAL(ctx, s.target, shard)
	if err != nil {
		return nil, err
	}
	next := m.ReplayAfter + 1
	for _, pos := range positions {
		if pos <= m.ReplayAfter {
			continue // sealed already; garbage left by a crash before WAL clean-up
		}
		if _, q := findQuarantined(m.Quarantined, walKey(s.target, shard, pos)); q {
			next = pos + 1 // set aside by an operator: its rows are given up
			continue
		}
		if err := w.replayClaimed(ctx, pos); err != nil {
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
		// The previous owner wrote here after our listing: its epoch check fails, so its rows
		// are not acknowledged, but they are durable and replay like any other.
		if err := w.replayClaimed(ctx, next); err != nil {
			return nil, err
		}
		next++
	}
	w.active.maxPos = next
	w.nextPos = next + 1
	if n := w.active.len(); n > 0 {
		s.db.log.Info("replayed unsealed WAL", zap.String("target", s.target.String()), zap.String("shard", shard), zap.Int("rows", n))
	}
	go w.runWALCommitter()
	return w, nil
}

// replayClaimed is openWriter's replay of a WAL object its claim listed or found taken; one
// gone when read was sealed by a newer owner that fenced this claim (ErrFenced, retried).
func (w *writer) replayClaimed(ctx context.Context, pos uint64) error {
	err := w.replay(ctx, pos)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("shard %s of %s: WAL position %d was deleted while this claim replayed it (%v): %w",
			w.shard, w.s.target, pos, err, ErrFenced)
	}
	return err
}

// replay adds the rows of WAL position pos to the active memtable. A row at or below the
// claimed manifest's max_seq is skipped: every write above replay_after got its sequence after
// the rows the shard sealed, so such a row is a copy of one sealed already (an old WAL object
// restored or copied under a higher position), and replayed it could bring back a key whose
// delete a compaction has since dropped; the object is counted as foreign.
//
// REQUIRES: w is not shared yet (openWriter, before the WAL committer starts), which is why
// it touches the fields mu guards without holding mu.
func (w *writer) replay(ctx context.Context, pos uint64) error {
	recs, err := w.s.readWAL(ctx, w.shard, pos)
	if err != nil {
		return err
	}
	defer releaseAll(recs)
	sealed, stale := w.manifest.MaxSeq, false
	for _, rec := range recs {
		view, err := w.s.codec.View(rec)
		if err != nil {
			return err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			seq := view.Seq(i)
			if seq <= sealed {
				stale = true
				continue
			}
			row, err := w.s.codec.RowAt(rec, i)
			if err != nil {
				return err
			}
			w.active.add(memRow{row: row, seq: seq, deleted: view.Deleted(i)})
			w.lastSeq = max(w.lastSeq, seq)
		}
	}
	if stale {
		w.s.db.foreignObject(foreignWAL, walKey(w.s.target, w.shard, pos))
	}
	w.active.maxPos = pos
	return nil
}

func (w *writer) pendingGenerations() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.manifest.Flushed)
}

// close stops the WAL committer and then seals the memtable, so every append it
// acknowledged is in the seal.
func (w *writer) close(ctx context.Context) error {
	w.stopCommitter()
	<-w.stopped
	_, err := w.seal(ctx, false)
	w.kill(ErrClosed)
	if errors.Is(err, ErrFenced) {
		return nil
	}
	return err
}

// manifestRefreshEvery bounds how often a writer at PendingMax reads its shard's manifest
// again: clients retrying refused writes then cost storage at most one read a second a shard.
const manifestRefreshEvery = time.Second

// refreshManifest adopts the shard's latest manifest, at most once per manifestRefreshEvery,
// since a merge committing elsewhere drains the shard without telling this writer, which
// would otherwise refuse every append at PendingMax. It reports whether it read one.
func (w *writer) refreshManifest(ctx context.Context) bool {
	now := w.s.db.opts.Now()
	w.mu.Lock()
	if !w.lastRefresh.IsZero() && now.Sub(w.lastRefresh) < manifestRefreshEvery && now.After(w.lastRefresh) {
		w.mu.Unlock()
		return false
	}
	w.lastRefresh = now
	w.mu.Unlock()
	m, err := w.s.loadShard(ctx, w.shard)
	if err != nil {
		return false
	}
	w.observe(m)
	return true
}

// atPendingMax reports whether the manifest this writer knows lists PendingMax generations.
func (w *writer) atPendingMax() bool {
	limit := w.s.db.opts.PendingMax
	return limit > 0 && w.pendingGenerations() >= limit
}

// observe adopts m when it is newer than the manifest the writer knows: editShard's result (a
// merge's drain, a quarantine) or refreshManifest's read.
func (w *writer) observe(m *manifest.Shard) {
	w.mu.Lock()
	if m != nil && m.Version > w.manifest.Version {
		w.manifest = m
	}
	w.mu.Unlock()
}
