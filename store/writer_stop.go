package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// How a writer ends: its WAL committer is stopped (DB.Close, eviction, or replacement of a
// dead writer), and appends caught in between are answered without being lost.

// errWriterEvicted is the death of a writer whose store was evicted after its last seal
// succeeded: everything it acknowledged is in a generation.
var errWriterEvicted = errors.New("writer retired: its store was evicted")

// maxSubmitAttempts bounds how often one append moves on to a store's next writer because
// the one it reached stopped before writing it.
const maxSubmitAttempts = 4

// stopCommitter tells the WAL committer to exit; it fails what is still queued with
// ErrClosed. Safe to call more than once and from any goroutine.
func (w *writer) stopCommitter() {
	w.stopOnce.Do(func() { close(w.stop) })
}

// await waits for the committer's answer to req; ErrClosed when the committer exited
// without taking it, so nothing was written and it may go to another writer.
func (w *writer) await(req *appendReq) appendDone {
	// The WAL committer answers everything it takes: the WAL write may already be under
	// way, so an abandoned request could still become durable; waiting keeps the answer
	// truthful.
	select {
	case d := <-req.done:
		return d
	case <-w.stopped:
		// The committer answers before it exits, so an answer is already here if it took req.
		select {
		case d := <-req.done:
			return d
		default:
			return appendDone{err: ErrClosed}
		}
	}
}

// retire ends the writer of an evicted store: it stops the WAL committer, then seals what it
// made durable, so every acknowledged append is in a generation on nil (or in the WAL a new
// owner replays); rows left unsealed, or a fence no claim followed, are an error.
func (w *writer) retire(ctx context.Context) error {
	w.stopCommitter()
	<-w.stopped
	_, err := w.seal(ctx, false)
	if err == nil && w.holdsRows() {
		err = fmt.Errorf("rows left unsealed at the pending limit: %w", ErrTooManyPending)
	}
	if err == nil && w.walAboveReplayPoint() {
		// At PendingMax the seal published nothing, so nothing read the writer epoch: a WAL
		// release may have fenced this writer, its claim having skipped the object.
		err = w.checkEpoch(ctx)
	}
	switch {
	case err == nil:
		w.kill(errWriterEvicted)
	case w.alive():
		// The rows are durable in the WAL; the next writer of the shard replays them.
		w.kill(fmt.Errorf("writer retired unsealed: %w", err))
	default:
		// Fenced, before or by this seal: by a new owner, or by a release no owner follows.
		replayed, rerr := w.replayedByNewerClaim(ctx)
		switch {
		case rerr != nil:
			err = fmt.Errorf("%w; and whether a new owner replays the WAL is unknown: %w", err, rerr)
		case replayed:
			err = nil
		default:
			err = fmt.Errorf("%w, by a manifest version no claim followed (a WAL release): nobody else replays the WAL", err)
		}
	}
	return err
}

// replayedByNewerClaim reports whether a newer claim of the shard has replayed every WAL
// object this writer wrote: such a claim writes its fence marker above every position it
// found, and this stopped writer never wrote above nextPos. A release's fence, or a claim
// not yet at its marker, looks unreplayed and is claimed over, which the protocol makes safe.
//
// REQUIRES: the WAL committer has exited.
func (w *writer) replayedByNewerClaim(ctx context.Context) (bool, error) {
	w.mu.Lock()
	hi, known := w.nextPos, w.handedOver
	w.mu.Unlock()
	if known {
		return true, nil
	}
	m, err := w.s.loadShard(ctx, w.shard)
	if err != nil {
		return false, err
	}
	replayed := m != nil && m.ReplayAfter >= hi
	if !replayed {
		positions, err := w.s.db.listWAL(ctx, w.s.target, w.shard)
		if err != nil {
			return false, err
		}
		replayed = slices.ContainsFunc(positions, func(pos uint64) bool { return pos > hi })
	}
	if replayed {
		w.mu.Lock()
		w.handedOver = true
		w.mu.Unlock()
	}
	return replayed, nil
}

// deadHandedOver reports whether a newer claim has replayed this dead writer's WAL, so its
// rows are that owner's to seal; it stops the committer first.
func (w *writer) deadHandedOver(ctx context.Context) (bool, error) {
	w.stopCommitter()
	select {
	case <-w.stopped:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return w.replayedByNewerClaim(ctx)
}

// holdsOrphanedRows reports whether the writer is dead with rows, or WAL above the replay
// point, in the WAL only, that no newer claim is known to have replayed.
func (w *writer) holdsOrphanedRows() bool {
	if !w.holdsRows() && !w.walAboveReplayPoint() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dead != nil && !w.handedOver
}

// walAboveReplayPoint reports whether the writer's memtables reach WAL positions above the
// replay point of the manifest it knows: WAL that only the next claim of the shard replays.
func (w *writer) walAboveReplayPoint() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	reach := w.active.maxPos
	for _, mt := range w.frozen {
		reach = max(reach, mt.maxPos)
	}
	return reach > w.manifest.ReplayAfter
}

// holdsRows reports whether the writer's memtables hold rows no seal has written (a seal
// leaves them at PendingMax, or failed).
func (w *writer) holdsRows() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active.len() > 0 || len(w.frozen) > 0
}
