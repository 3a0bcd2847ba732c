package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Budget is the process-wide merge memory budget in bytes, shared by every merge whatever
// triggered it (docs/DESIGN.md §3). A nil *Budget or a limit <= 0 is unlimited.
//
// Why it cannot deadlock: a merge takes its whole initial allowance in ONE all-or-nothing
// acquire (the only call that waits), and growth while holding never waits (TryGrow). So no
// caller ever waits while holding bytes, and every holder eventually releases. The semaphore
// is FIFO: a large waiting request is not starved by a stream of small ones, and while anyone
// waits TryGrow refuses even if bytes are free, so holders shrink their work instead of
// overtaking the queue.
type Budget struct {
	limit    int64
	sem      *semaphore.Weighted // nil when unlimited
	reserved atomic.Int64        // gauge; never above the semaphore's own count, so never above limit
	waiting  atomic.Int64
	// allocated is what the memAccounts of this budget's reservations hold (alloc.go);
	// pool keeps their freed buffers for reuse (nil when unlimited).
	allocated atomic.Int64
	pool      *bufferPool
}

// NewBudget returns a budget of limit bytes; limit <= 0 means unlimited.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return &Budget{}
	}
	b := &Budget{limit: limit, sem: semaphore.NewWeighted(limit)}
	b.pool = &bufferPool{budget: b, free: map[int][][]byte{}}
	return b
}

// Allocated returns the bytes the accounts of this budget's reservations have allocated
// and not freed (alloc.go). It may exceed Reserved only by an overdraft (memAccount.err) or
// the lone whole-limit holder's growth.
func (b *Budget) Allocated() int64 {
	if b == nil {
		return 0
	}
	return b.allocated.Load()
}

// Limit returns the limit in bytes, 0 when unlimited.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Reserved returns the bytes currently reserved (a gauge for metrics). An unlimited non-nil
// budget still counts what its holders asked for; a nil budget always reports 0.
func (b *Budget) Reserved() int64 {
	if b == nil {
		return 0
	}
	return b.reserved.Load()
}

// Waiting returns how many Reserve calls are currently blocked.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	return int(b.waiting.Load())
}

// Reserve takes min(want, limit) in one all-or-nothing acquire; it may wait and is
// cancellable via ctx (a cancelled wait takes nothing and returns ctx's error). A want larger
// than the limit is clamped to the limit, so that lone oversized request runs alone once the
// budget is idle instead of failing forever. The returned duration is the time spent waiting
// (0 when granted at once), for walkeeper_merge_budget_wait_seconds.
//
// Unlimited (nil budget or limit <= 0): returns at once a reservation of want bytes that
// holds nothing. want < 0 is ErrInvalidInput; want == 0 is an empty reservation.
func (b *Budget) Reserve(ctx context.Context, want int64) (*Reservation, time.Duration, error) {
	if want < 0 {
		return nil, 0, invalidf("budget reserve: negative size %d", want)
	}
	if ctx == nil {
		return nil, 0, invalidf("budget reserve: nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if b == nil {
		return &Reservation{bytes: want}, 0, nil
	}
	if b.sem == nil {
		b.reserved.Add(want)
		return &Reservation{b: b, bytes: want}, 0, nil
	}
	n := min(want, b.limit)
	if n == 0 {
		// Acquire(0) would queue behind waiters; an empty reservation needs no bytes.
		return &Reservation{b: b}, 0, nil
	}
	var waited time.Duration
	if !b.sem.TryAcquire(n) {
		b.waiting.Add(1)
		start := time.Now()
		err := b.sem.Acquire(ctx, n)
		waited = time.Since(start)
		b.waiting.Add(-1)
		if err != nil {
			return nil, waited, err
		}
	}
	b.reserved.Add(n) // after the acquire: the gauge never runs ahead of the semaphore
	return &Reservation{b: b, bytes: n}, waited, nil
}

// reserveWithin is Reserve waiting at most wait. timedOut reports that the wait ran out while
// ctx was still live: the budget had no room in time, which reads and appends report as
// ErrBudgetBusy, so a client asks again instead of waiting without bound.
func reserveWithin(ctx context.Context, b *Budget, want int64, wait time.Duration) (_ *Reservation, timedOut bool, _ error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, _, err := b.Reserve(wctx, want)
	return res, err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded), err
}

// Reservation is bytes held from a Budget until Release. Safe for concurrent use; a nil
// *Reservation holds nothing (TryGrow false, Release no-op).
type Reservation struct {
	b        *Budget
	mu       sync.Mutex
	bytes    int64
	released bool
}

// Bytes returns the bytes currently held (0 after Release).
func (r *Reservation) Bytes() int64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// TryGrow grows the reservation to total bytes without ever waiting: it is called while
// holding, and waiting while holding is what could deadlock. The extra is clamped so the
// reservation never exceeds the limit; a holder that already holds the whole limit may
// "grow" past it (true, nothing taken): it is the lone oversized merge and nobody else runs.
// Returns false, leaving the reservation unchanged, when the extra bytes are not free or
// another caller is queued in Reserve (FIFO: growth must not overtake a waiter); the caller
// then works with what it holds (commits the complete prefix). total <= Bytes() is true.
// A released reservation cannot grow.
func (r *Reservation) TryGrow(total int64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tryGrowLocked(total)
}

// tryGrowBy is TryGrow to extra bytes more than the reservation holds, atomically: concurrent
// callers each get their own extra.
func (r *Reservation) tryGrowBy(extra int64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tryGrowLocked(r.bytes + max(extra, 0))
}

// tryGrowLocked is TryGrow with r.mu held.
func (r *Reservation) tryGrowLocked(total int64) bool {
	if r.released {
		return false
	}
	if total <= r.bytes {
		return true
	}
	switch {
	case r.b == nil:
		r.bytes = total
		return true
	case r.b.sem == nil:
		r.b.reserved.Add(total - r.bytes)
		r.bytes = total
		return true
	}
	extra := min(total, r.b.limit) - r.bytes
	if extra <= 0 {
		return true
	}
	if !r.b.sem.TryAcquire(extra) {
		return false
	}
	r.b.reserved.Add(extra)
	r.bytes += extra
	return true
}

// budget returns the reservation's budget (nil for a nil budget).
func (r *Reservation) budget() *Budget {
	if r == nil {
		return nil
	}
	return r.b
}

// holdsWholeLimit reports whether the reservation holds the budget's whole (non-zero) limit:
// the lone oversized holder, whose TryGrow succeeds past the limit because nobody else runs.
// An unlimited budget's reservations always grow, so they count as whole too.
func (r *Reservation) holdsWholeLimit() bool {
	l := r.budget().Limit()
	return l <= 0 || r.Bytes() >= l
}

// Release returns the bytes to the budget. Idempotent, so it can sit in a defer and also be
// called early once a merge no longer needs memory.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	n := r.bytes
	r.bytes = 0
	if r.b == nil || n == 0 {
		return
	}
	r.b.reserved.Add(-n) // before the release: the gauge never runs ahead of the semaphore
	if r.b.sem != nil {
		r.b.sem.Release(n)
	}
}
