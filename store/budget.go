package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Budget is a process-wide memory budget in bytes (docs/DESIGN.md §3); nil or a limit <= 0 is
// unlimited. Only the all-or-nothing Reserve waits and TryGrow refuses while anyone waits, so
// it cannot deadlock.
type Budget struct {
	limit    int64
	sem      *semaphore.Weighted // nil when unlimited
	reserved atomic.Int64        // gauge; never above the semaphore's own count, so never above limit
	waiting  atomic.Int64
	// allocated is what its reservations' memAccounts hold; pool keeps their freed buffers.
	allocated atomic.Int64
	pool      *bufferPool
}

// DefaultMergeBudgetBytes is the merge budget of a worker not told otherwise
// (--merge-budget-bytes).
const DefaultMergeBudgetBytes = 3 << 30

// NewBudget returns a budget of limit bytes; limit <= 0 means unlimited.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return &Budget{}
	}
	b := &Budget{limit: limit, sem: semaphore.NewWeighted(limit)}
	b.pool = &bufferPool{budget: b, free: map[int][][]byte{}}
	return b
}

// Allocated returns the bytes this budget's reservations' accounts hold.
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

// Reserved returns the bytes currently reserved (0 for a nil budget).
func (b *Budget) Reserved() int64 {
	if b == nil {
		return 0
	}
	return b.reserved.Load()
}

// Waiting returns how many Reserve calls are waiting for bytes. A call counts just before it
// joins the semaphore's queue, so for a moment it may count while the bytes it waits for could
// still be taken ahead of it: a gauge for metrics and admission hints, not a synchronization.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	return int(b.waiting.Load())
}

// Reserve takes min(want, limit) in one all-or-nothing acquire, waiting until ctx is done, and
// returns how long it waited; clamped, a want above the limit runs alone instead of never.
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

// reserveWithin is Reserve waiting at most wait; timedOut means the budget had no room in time.
func reserveWithin(ctx context.Context, b *Budget, want int64, wait time.Duration) (_ *Reservation, timedOut bool, _ error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, _, err := b.Reserve(wctx, want)
	return res, err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded), err
}

// Reservation is bytes held from a Budget until Release; a nil one holds nothing.
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

// TryGrow grows the reservation to total bytes without waiting, since it is called while
// holding: false when the bytes are not free or a Reserve is queued; the lone holder of the
// whole limit may grow past it.
func (r *Reservation) TryGrow(total int64) bool { return r.tryGrow(total, 0) }

// tryGrowBy is TryGrow by extra bytes, atomically, so concurrent callers each get their own.
func (r *Reservation) tryGrowBy(extra int64) bool { return r.tryGrow(0, max(extra, 0)) }

// tryGrow is TryGrow to total, or to extra bytes more than the reservation holds if that is
// more.
func (r *Reservation) tryGrow(total, extra int64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return false
	}
	total = max(total, r.bytes+extra)
	if r.b != nil && r.b.sem != nil {
		total = min(total, r.b.limit)
	}
	if total <= r.bytes {
		return true
	}
	if r.b != nil && r.b.sem != nil && !r.b.sem.TryAcquire(total-r.bytes) {
		return false
	}
	if r.b != nil {
		r.b.reserved.Add(total - r.bytes) // after the acquire, as in Reserve
	}
	r.bytes = total
	return true
}

// budget returns the reservation's budget (nil for a nil budget).
func (r *Reservation) budget() *Budget {
	if r == nil {
		return nil
	}
	return r.b
}

// holdsWholeLimit reports whether the reservation holds the budget's whole limit (always,
// unlimited).
func (r *Reservation) holdsWholeLimit() bool {
	l := r.budget().Limit()
	return l <= 0 || r.Bytes() >= l
}

// Release returns the bytes to the budget; idempotent, so it can sit in a defer too.
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
