package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// The WAL group commit, not to be confused with a merge's CommitRound (merge_publish.go).

type appendReq struct {
	rows    []Row
	bytes   int64 // the decoded estimate the append was checked and charged with
	deleted bool
	done    chan appendDone
}

type appendDone struct {
	res AppendResult
	err error
}

// runWALCommitter is the WAL group committer goroutine: it writes what queued since the last
// WAL write, up to GroupCommitMaxRows rows after lingering GroupCommitWait for more, so
// concurrent appenders share one write, as one WAL object per MemtableBytes of rows
// (walGroups), until w.stop.
func (w *writer) runWALCommitter() {
	defer close(w.stopped)
	for {
		var first *appendReq
		select {
		case first = <-w.reqs:
		case <-w.stop:
			for {
				select {
				case r := <-w.reqs:
					r.done <- appendDone{err: ErrClosed}
				default:
					return
				}
			}
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
		for _, group := range walGroups(batch, w.s.db.opts.MemtableBytes) {
			w.walGroupCommit(group)
		}
	}
}

// nextSeqLocked is a hybrid logical clock: wall-clock nanoseconds, strictly increasing per
// shard.
//
// REQUIRES: w.mu held.
func (w *writer) nextSeqLocked() int64 {
	now := w.s.db.opts.Now().UnixNano()
	if now <= w.lastSeq {
		now = w.lastSeq + 1
	}
	w.lastSeq = now
	return now
}

// walGroupCommit makes one group durable as the WAL object at the next position with
// put-if-absent (a newer owner that took it fences us), then checks that the shard's writer
// epoch is still ours, adds the rows to the active memtable (sealing them with
// seal-on-append) and answers. Called only by runWALCommitter.
func (w *writer) walGroupCommit(batch []*appendReq) {
	ctx := context.Background()
	answered := false
	answer := func(res AppendResult, err error) {
		answered = true
		for _, r := range batch {
			rr := res
			rr.Rows = len(r.rows)
			r.done <- appendDone{res: rr, err: err}
		}
	}
	defer func() {
		// A panic may leave the batch written to the WAL but not to the memtable: the writer
		// is killed, so the next append claims the shard and replays it, and the batch
		// is answered with the panic instead of waiting for ever.
		if v := recover(); v != nil {
			err := logPanic(w.s.db.log, "WAL group commit", v)
			// Appends that reach the dead writer later fail as internal, not as the panic
			// itself, which is answered and counted once.
			w.kill(fmt.Errorf("shard %s of %s: the writer stopped when its WAL committer panicked; the next append claims the shard again", w.shard, w.s.target))
			if !answered {
				answer(AppendResult{}, err)
			}
		}
	}()
	pos, rows, seqs, deleted, dead := w.sequence(batch)
	if dead != nil {
		answer(AppendResult{}, dead)
		return
	}
	data, _, err := w.encodeRows(rows, seqs, deleted)
	if err != nil {
		answer(AppendResult{}, err)
		return
	}
	data = frameWAL(data)
	if limit := w.s.db.walReadLimit(); int64(len(data)) > limit {
		// walGroups keeps a group far below it: an object no reader would read is not written.
		answer(AppendResult{}, fmt.Errorf("%s: %w: its group commit encodes to %d bytes, more than the %d a WAL object may hold",
			w.s.target, ErrAppendTooLarge, len(data), limit))
		return
	}
	key := walKey(w.s.target, w.shard, pos)
	err = w.s.db.bucket.PutIfAbsent(ctx, key, data)
	if errors.Is(err, ErrAlreadyExists) {
		// Either our own write landed but reported failure on an earlier try (same bytes),
		// or another process claimed the shard and took this position: we are fenced. A longer
		// object is not ours, so no more than ours is read.
		if got, gerr := w.s.db.bucket.GetAtMost(ctx, key, int64(len(data)), nil); gerr == nil && bytes.Equal(got, data) {
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
	// INVARIANT: a write is acknowledged only if it landed within walAckWindow of its first
	// row's sequence, so a compaction may drop a tombstone older than settledSeqBound without
	// seeing writes still in flight. A later one is durable and read like any other, but
	// answered as stalled: a client that retries it writes a newer version of the same rows.
	var late error
	if took := w.s.db.opts.Now().Sub(time.Unix(0, seqs[0])); took > walAckWindow {
		late = fmt.Errorf("%s: WAL write %s landed %s after its rows were sequenced, past the %s within which a write is acknowledged; its rows are durable but not acknowledged: %w",
			w.s.target, key, took.Round(time.Second), walAckWindow, ErrStalled)
		w.s.db.metrics.WALWritesLate.Inc()
		w.s.db.log.Warn("a WAL write landed too late to be acknowledged", zap.String("target", w.s.target.String()),
			zap.String("key", key), zap.Duration("took", took), zap.Int("rows", len(rows)))
	}
	// The position may have been free only because the new owner already sealed and
	// deleted it: check the epoch before acknowledging. A claim after this check lists the
	// WAL after our write, and our position is above its replay point, so it replays us.
	if err := w.checkEpoch(ctx); err != nil {
		answer(AppendResult{}, err)
		return
	}
	w.s.db.metrics.WALObjects.Inc()
	full, sealing := w.addCommitted(pos, rows, seqs, deleted)

	res := AppendResult{WALPosition: pos}
	switch {
	case w.s.meta.SealOnAppend:
		fr, err := w.seal(ctx, true)
		if err != nil {
			// The rows are durable (WAL) and visible here, but not yet to other readers.
			answer(res, fmt.Errorf("append durable but not sealed: %w", err))
			return
		}
		res.Generation = fr.Generation
	case full && sealing:
		// The seal started for the last full memtable has not finished: seal here, so that
		// appends wait (the WAL committer is theirs) instead of memtables piling up.
		_, _ = w.seal(ctx, false)
	case full:
		go w.sealFull()
	}
	answer(res, late)
}

// sequence gives the batch's rows their sequence numbers and the WAL position, and returns
// whether the writer is dead. Its unlock is deferred, as the recovery of a panic (the clock
// is the caller's) kills the writer under the same mutex.
func (w *writer) sequence(batch []*appendReq) (pos uint64, rows []Row, seqs []int64, deleted []bool, dead error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range batch {
		for _, row := range r.rows {
			rows = append(rows, row)
			seqs = append(seqs, w.nextSeqLocked())
			deleted = append(deleted, r.deleted)
		}
	}
	return w.nextPos, rows, seqs, deleted, w.dead
}

// addCommitted adds the rows of the WAL object at pos to the active memtable, all or none
// (addAll), and reports whether it is full and a size seal already runs; its unlock is
// deferred as sequence's is.
func (w *writer) addCommitted(pos uint64, rows []Row, seqs []int64, deleted []bool) (full, sealing bool) {
	batch := make([]memRow, len(rows))
	for i := range rows {
		batch[i] = memRow{row: rows[i], seq: seqs[i], deleted: deleted[i]}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextPos = pos + 1
	w.active.addAll(batch)
	w.active.maxPos = pos
	full = w.active.bytes >= w.s.db.opts.MemtableBytes
	sealing = w.sizeSealing
	if full && !sealing {
		w.sizeSealing = true
	}
	return full, sealing
}

// sealFull seals a memtable that reached MemtableBytes, off the WAL committer; a failure
// leaves the rows in the WAL and readable for the next seal to retry.
func (w *writer) sealFull() {
	defer func() {
		w.mu.Lock()
		w.sizeSealing = false
		w.mu.Unlock()
	}()
	defer w.s.db.recoverPanic("seal of a full memtable", nil)
	_, _ = w.seal(context.Background(), false)
}

// checkEpoch is every WAL group commit's fencing check: ErrFenced, killing the writer, unless
// the shard's latest manifest names this writer's epoch. The storage read is the check; the
// decode is cached.
func (w *writer) checkEpoch(ctx context.Context) error {
	m, err := w.s.loadShard(ctx, w.shard)
	if err != nil || m != nil && m.WriterEpoch == w.epoch {
		return err
	}
	err = fmt.Errorf("shard %s of %s claimed by another writer: %w", w.shard, w.s.target, ErrFenced)
	w.kill(err)
	return err
}
