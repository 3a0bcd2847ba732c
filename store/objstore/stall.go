package objstore

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long one storage operation may go without progress before it
// fails with ErrStalled, unless the bucket says otherwise (Bucket.WithStallTimeout).
const DefaultStallTimeout = 2 * time.Minute

// ContextFaults is a Faults whose Before also sees the operation's context, the one the
// stall timeout cancels; a fault that models a server that never answers waits on it.
type ContextFaults interface {
	Faults
	BeforeContext(ctx context.Context, op, key string) error
}

// HangFaults makes every operation that hang(op, key) selects wait, as on a server that
// accepts the request and never answers, until the operation's context ends.
type HangFaults struct {
	FaultFuncs // zero: Before and After pass every call through
	Hang       func(op, key string) bool
}

// BeforeContext implements ContextFaults.
func (h HangFaults) BeforeContext(ctx context.Context, op, key string) error {
	if h.Hang == nil || !h.Hang(op, key) {
		return nil
	}
	<-ctx.Done()
	return context.Cause(ctx)
}

// WithStallTimeout returns a view of the same bucket whose operations fail with ErrStalled
// after d without progress (d <= 0 = DefaultStallTimeout). The view keeps b's faults.
func (b *Bucket) WithStallTimeout(d time.Duration) *Bucket {
	if b == nil {
		return nil
	}
	return &Bucket{core: b.core, faults: b.faults, stall: d, refused: b.refused}
}

// watchdog cancels one operation's context once the storage has made no progress (an answer,
// a byte, a listed object) for d, paused while the caller's own code runs.
type watchdog struct {
	d       time.Duration
	mu      sync.Mutex
	t       *time.Timer
	stalled atomic.Bool
}

// watch returns ctx bounded by a fresh watchdog, and a stop that releases it.
func watch(ctx context.Context, d time.Duration) (context.Context, *watchdog, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.stalled.Store(true)
		cancel(ErrStalled)
	})
	return ctx, w, func() {
		w.pause()
		cancel(nil)
	}
}

// progress restarts the clock (a nil watchdog does nothing).
func (w *watchdog) progress() {
	if w != nil {
		w.mu.Lock()
		w.t.Reset(w.d)
		w.mu.Unlock()
	}
}

// pause stops the clock until the next progress.
func (w *watchdog) pause() {
	if w != nil {
		w.mu.Lock()
		w.t.Stop()
		w.mu.Unlock()
	}
}

// explain turns the error of an operation the watchdog cut into ErrStalled.
func (w *watchdog) explain(parent context.Context, err error) error {
	if err == nil || !w.stalled.Load() || parent.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: no progress for %v: %v", ErrStalled, w.d, err)
}

// progressReader reports every read that returned bytes as progress.
type progressReader struct {
	r io.Reader
	w *watchdog
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.progress()
	}
	return n, err
}

// stallWriter runs the clock only while a Write waits on the storage: the caller's
// computation between writes is not the storage's stall.
type stallWriter struct {
	w  io.Writer
	wd *watchdog
}

func (s stallWriter) Write(b []byte) (int, error) {
	s.wd.progress()
	defer s.wd.pause()
	return s.w.Write(b)
}

// callerFn wraps a listing's callback: each item is progress, and the clock is paused while
// the caller's fn runs.
func callerFn[T any](wd *watchdog, fn func(T) error) func(T) error {
	return func(v T) error {
		wd.pause()
		defer wd.progress()
		return fn(v)
	}
}
