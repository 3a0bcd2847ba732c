package store

import (
	"context"
	"errors"
	"fmt"
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

// await waits for the committer's answer to req. taken is false when the committer exited
// without taking req (it was queued after the committer drained its queue): nothing of it
// was written, so it may go to another writer.
func (w *writer) await(req *appendReq) (d appendDone, taken bool) {
	// The WAL committer answers everything it takes: the WAL write may already be under
	// way, so an abandoned request could still become durable; waiting keeps the answer
	// truthful.
	select {
	case d = <-req.done:
		return d, true
	case <-w.stopped:
		// The committer answers before it exits, so an answer is already here if it took req.
		select {
		case d = <-req.done:
			return d, true
		default:
			return appendDone{}, false
		}
	}
}

// retire ends the writer of an evicted store: it stops the WAL committer, then seals what
// the committer made durable, so every append the writer acknowledged is in a generation
// when it returns nil (or fenced: in the WAL the shard's new owner replays). Rows a seal
// stopped at PendingMax left in the memtable are an error, as a failed seal is.
func (w *writer) retire(ctx context.Context) error {
	w.stopCommitter()
	<-w.stopped
	_, err := w.seal(ctx, false)
	if err == nil && w.holdsRows() {
		err = fmt.Errorf("rows left unsealed at the pending limit: %w", ErrTooManyPending)
	}
	switch {
	case err == nil:
		w.kill(errWriterEvicted)
	case w.alive():
		// The rows are durable in the WAL; the next writer of the shard replays them.
		w.kill(fmt.Errorf("writer retired unsealed: %w", err))
	default:
		err = nil // fenced (before or by this seal): the shard's new owner replays our WAL
	}
	return err
}

// holdsRows reports whether the writer's memtables hold rows no seal has written (a seal
// leaves them at PendingMax, or failed).
func (w *writer) holdsRows() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active.len() > 0 || len(w.frozen) > 0
}
