package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/walkeeper/walkeeper/store"
)

// budgetWait is how long a request waits for a process-wide byte budget before it gets 503
// budget_busy: long enough to ride out a burst, short enough never to hold a connection long.
var budgetWait = 2 * time.Second

// byteBudget bounds the bytes concurrent requests hold at once for one purpose, so many
// connections within their own caps cannot together exceed one knob (nil: no bound).
type byteBudget struct {
	sem  *semaphore.Weighted
	size int64
	knob string // the flag that sizes it, named in the refusal
	what string // what holds it, named in the refusal
}

// newByteBudget is a budget of size bytes, or nil when size is 0 (no cap).
func newByteBudget(size int64, knob, what string) *byteBudget {
	if size <= 0 {
		return nil
	}
	return &byteBudget{sem: semaphore.NewWeighted(size), size: size, knob: knob, what: what}
}

// take reserves n bytes, waiting at most budgetWait (else store.ErrBudgetBusy, or ctx's error
// when ctx ended first: the client went away); the caller calls release, idempotent, once it
// no longer holds them.
//
// REQUIRES: n <= the budget's size (Config.Validate keeps every reservation within it).
func (b *byteBudget) take(ctx context.Context, n int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s hold the budget of --%s (%d bytes) for longer than %s; this one needs %d bytes: %w",
			b.what, b.knob, b.size, budgetWait, n, store.ErrBudgetBusy)
	}
	return sync.OnceFunc(func() { b.sem.Release(n) }), nil
}
