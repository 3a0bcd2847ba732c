package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or a generous deadline passes (the -race detector on two
// cores can be slow; the deadline only bounds a failure, never a pass).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustReserve(t *testing.T, b *Budget, want int64) *Reservation {
	t.Helper()
	r, _, err := b.Reserve(context.Background(), want)
	if err != nil {
		t.Fatalf("Reserve(%d): %v", want, err)
	}
	return r
}

type reserveResult struct {
	r      *Reservation
	waited time.Duration
	err    error
}

func reserveAsync(ctx context.Context, b *Budget, want int64) <-chan reserveResult {
	ch := make(chan reserveResult, 1)
	go func() {
		r, w, err := b.Reserve(ctx, want)
		ch <- reserveResult{r, w, err}
	}()
	return ch
}

func expectBlocked(t *testing.T, ch <-chan reserveResult, d time.Duration) {
	t.Helper()
	select {
	case res := <-ch:
		t.Fatalf("Reserve returned while it should wait: %+v", res)
	case <-time.After(d):
	}
}

func receive(t *testing.T, ch <-chan reserveResult) reserveResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatalf("Reserve did not resume")
		return reserveResult{}
	}
}

// receiveBytes is receive of a Reserve that must succeed holding want bytes.
func receiveBytes(t *testing.T, ch <-chan reserveResult, what string, want int64) reserveResult {
	t.Helper()
	res := receive(t, ch)
	if res.err != nil || res.r.Bytes() != want {
		t.Fatalf("%s Reserve = %+v, want %d bytes", what, res, want)
	}
	return res
}

// requireBudget fails unless b has reserved bytes out and waiting requests queued.
func requireBudget(t *testing.T, b *Budget, reserved, waiting int) {
	t.Helper()
	if b.Reserved() != int64(reserved) || b.Waiting() != waiting {
		t.Fatalf("Reserved = %d, Waiting = %d; want %d, %d", b.Reserved(), b.Waiting(), reserved, waiting)
	}
}

func TestBudgetReserveRelease(t *testing.T) {
	b := NewBudget(100)
	if b.Limit() != 100 {
		t.Fatalf("Limit = %d", b.Limit())
	}
	r, waited, err := b.Reserve(context.Background(), 30)
	if err != nil || r.Bytes() != 30 || waited != 0 {
		t.Fatalf("Reserve = %d, %v, %v", r.Bytes(), waited, err)
	}
	r2 := mustReserve(t, b, 70)
	requireBudget(t, b, 100, 0)
	r.Release()
	r.Release() // idempotent: must not give back 30 twice
	if b.Reserved() != 70 || r.Bytes() != 0 {
		t.Fatalf("after double release: Reserved = %d, Bytes = %d", b.Reserved(), r.Bytes())
	}
	if r.TryGrow(10) {
		t.Fatalf("a released reservation grew")
	}
	r2.Release()
	requireBudget(t, b, 0, 0)
	// The whole limit is available again, without waiting.
	r3, waited, err := b.Reserve(context.Background(), 100)
	if err != nil || waited != 0 || r3.Bytes() != 100 {
		t.Fatalf("Reserve(limit) = %v, %v, %v", r3.Bytes(), waited, err)
	}
	r3.Release()

	// Zero and invalid sizes.
	z := mustReserve(t, b, 0)
	if z.Bytes() != 0 || b.Reserved() != 0 {
		t.Fatalf("zero reservation holds %d", z.Bytes())
	}
	if !z.TryGrow(5) || z.Bytes() != 5 || b.Reserved() != 5 {
		t.Fatalf("zero reservation could not grow: %d", z.Bytes())
	}
	z.Release()
	if _, _, err := b.Reserve(context.Background(), -1); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("Reserve(-1): %v", err)
	}
	requireBudget(t, b, 0, 0)
}

// TestBudgetUnlimited: nil and zero-limit budgets never wait and never refuse.
func TestBudgetUnlimited(t *testing.T) {
	for name, b := range map[string]*Budget{"nil": nil, "zero": NewBudget(0), "negative": NewBudget(-5)} {
		t.Run(name, func(t *testing.T) {
			r, waited, err := b.Reserve(context.Background(), 1<<40)
			if err != nil || waited != 0 || r.Bytes() != 1<<40 {
				t.Fatalf("Reserve = %v, %v, %v", r, waited, err)
			}
			r2 := mustReserve(t, b, 1<<40)
			if !r.TryGrow(1<<50) || r.Bytes() != 1<<50 {
				t.Fatalf("TryGrow on unlimited = %d", r.Bytes())
			}
			if b.Limit() != 0 || b.Waiting() != 0 {
				t.Fatalf("Limit = %d, Waiting = %d", b.Limit(), b.Waiting())
			}
			r.Release()
			r2.Release()
			r.Release()
			requireBudget(t, b, 0, 0)
		})
	}
	var nr *Reservation
	nr.Release()
	if nr.Bytes() != 0 || nr.TryGrow(1) {
		t.Fatalf("nil reservation misbehaves")
	}
}

// TestBudgetExhaustedWaitsAndResumes: with the budget full the next Reserve blocks, shows in
// Waiting(), and resumes as soon as bytes are released, reporting how long it waited.
func TestBudgetExhaustedWaitsAndResumes(t *testing.T) {
	b := NewBudget(100)
	holder := mustReserve(t, b, 100)
	start := time.Now()
	ch := reserveAsync(context.Background(), b, 10)
	waitFor(t, "the reservation to queue", func() bool { return b.Waiting() == 1 })
	expectBlocked(t, ch, 150*time.Millisecond)
	holder.Release()
	res := receiveBytes(t, ch, "resumed", 10)
	if res.waited < 100*time.Millisecond || res.waited > time.Since(start) {
		t.Fatalf("reported wait %v, want >= 100ms and <= %v", res.waited, time.Since(start))
	}
	requireBudget(t, b, 10, 0)
	res.r.Release()
}

// TestBudgetCancelWhileWaiting: cancelling a queued Reserve returns ctx's error and takes
// nothing, and the queue does not stay blocked behind the cancelled request.
func TestBudgetCancelWhileWaiting(t *testing.T) {
	b := NewBudget(100)
	holder := mustReserve(t, b, 60)
	ctx, cancel := context.WithCancel(context.Background())
	big := reserveAsync(ctx, b, 80) // needs 80, only 40 free
	waitFor(t, "the reservation to queue", func() bool { return b.Waiting() == 1 })
	// A small request queues behind the big one (FIFO) ...
	small := reserveAsync(context.Background(), b, 30)
	waitFor(t, "the second reservation to queue", func() bool { return b.Waiting() == 2 })
	cancel()
	res := receive(t, big)
	if !errors.Is(res.err, context.Canceled) || res.r != nil {
		t.Fatalf("cancelled Reserve = %+v, want context.Canceled", res)
	}
	// ... and proceeds once the cancelled request leaves the queue.
	sres := receiveBytes(t, small, "small", 30)
	requireBudget(t, b, 90, 0)
	holder.Release()
	sres.r.Release()
	requireBudget(t, b, 0, 0)
	// An already-cancelled context fails at once even if bytes are free.
	if _, _, err := b.Reserve(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with dead ctx: %v", err)
	}
	// Deadline while waiting.
	holder = mustReserve(t, b, 100)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, _, err := b.Reserve(dctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve past deadline: %v", err)
	}
	holder.Release()
	if r, w, err := b.Reserve(context.Background(), 100); err != nil || w != 0 {
		t.Fatalf("budget not whole after cancellations: %v, %v", w, err)
	} else {
		r.Release()
	}
}

// TestBudgetOversizedRunsAlone: a request above the limit is clamped to the limit, waits
// until the budget is idle, then holds all of it; later requests queue behind it.
func TestBudgetOversizedRunsAlone(t *testing.T) {
	b := NewBudget(100)
	a := mustReserve(t, b, 30)
	c := mustReserve(t, b, 30)
	big := reserveAsync(context.Background(), b, 500)
	waitFor(t, "the oversized request to queue", func() bool { return b.Waiting() == 1 })
	later := reserveAsync(context.Background(), b, 10) // 40 free, but FIFO puts it behind
	waitFor(t, "the later request to queue", func() bool { return b.Waiting() == 2 })
	a.Release()
	expectBlocked(t, big, 50*time.Millisecond)
	c.Release()
	res := receiveBytes(t, big, "oversized", 100)
	expectBlocked(t, later, 50*time.Millisecond)
	// Holding the whole limit, it may "grow" past it (nothing more is taken).
	if !res.r.TryGrow(1000) || res.r.Bytes() != 100 || b.Reserved() != 100 {
		t.Fatalf("TryGrow past the limit: %d bytes, Reserved %d", res.r.Bytes(), b.Reserved())
	}
	res.r.Release()
	lres := receiveBytes(t, later, "later", 10)
	lres.r.Release()
}

// TestBudgetGrowthNeverWaits: six holders fill the budget; every TryGrow fails at once
// instead of waiting for the others (which would deadlock all six), then all release.
func TestBudgetGrowthNeverWaits(t *testing.T) {
	b := NewBudget(60)
	holders := make([]*Reservation, 6)
	for i := range holders {
		holders[i] = mustReserve(t, b, 10)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		grown := make(chan struct{}) // nobody releases before every holder has tried to grow
		var tried sync.WaitGroup
		tried.Add(len(holders))
		go func() { tried.Wait(); close(grown) }()
		for _, h := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer h.Release()
				defer func() { tried.Done(); <-grown }()
				start := time.Now()
				if h.TryGrow(25) {
					t.Errorf("TryGrow succeeded on a full budget")
				}
				if d := time.Since(start); d > 10*time.Second { // a wait would be for a release, which comes only after every TryGrow
					t.Errorf("TryGrow took %v; it must never wait", d)
				}
				if h.Bytes() != 10 {
					t.Errorf("failed TryGrow changed the reservation to %d", h.Bytes())
				}
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: growing holders never finished")
	}
	requireBudget(t, b, 0, 0)
	// With room, growth is clamped to the limit.
	r := mustReserve(t, b, 10)
	if !r.TryGrow(30) || r.Bytes() != 30 {
		t.Fatalf("TryGrow with room: %d", r.Bytes())
	}
	if !r.TryGrow(1000) || r.Bytes() != 60 || b.Reserved() != 60 {
		t.Fatalf("TryGrow clamped: %d bytes, Reserved %d", r.Bytes(), b.Reserved())
	}
	if !r.TryGrow(20) || r.Bytes() != 60 {
		t.Fatalf("TryGrow to a smaller total changed the reservation: %d", r.Bytes())
	}
	r.Release()
}

// TestBudgetQueuedReserveDoesNotBlockGrowingHolder: a holder that wants to grow while an
// initial Reserve is queued is refused at once (even if the bytes would fit: FIFO), commits
// what it has and releases, which lets the queued request through. No cycle, no deadlock.
func TestBudgetQueuedReserveDoesNotBlockGrowingHolder(t *testing.T) {
	b := NewBudget(100)
	holder := mustReserve(t, b, 40)
	queued := reserveAsync(context.Background(), b, 100)
	waitFor(t, "the initial reservation to queue", func() bool { return b.Waiting() == 1 })
	finished := make(chan bool, 1)
	go func() {
		grew := holder.TryGrow(60) // 60 free, but a waiter is queued
		holder.Release()
		finished <- grew
	}()
	select {
	case grew := <-finished:
		if grew {
			t.Fatalf("TryGrow overtook a queued Reserve")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: growing holder blocked behind the queued reservation")
	}
	res := receiveBytes(t, queued, "queued", 100)
	res.r.Release()
	requireBudget(t, b, 0, 0)
}

// TestBudgetHammer: many goroutines reserve, grow, cancel and release at random. The gauge
// must never exceed the limit, the bytes actually held never exceed it, and everything
// returns to zero at the end.
func TestBudgetHammer(t *testing.T) {
	const limit = 1000
	b := NewBudget(limit)
	var held atomic.Int64 // sum of Bytes() of live reservations, maintained by the workers
	stop := make(chan struct{})
	var samplerWG sync.WaitGroup
	samplerWG.Add(1)
	go func() {
		defer samplerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := b.Reserved(); r > limit || r < 0 {
				t.Errorf("Reserved() = %d, limit %d", r, limit)
				return
			}
			if h := held.Load(); h > limit {
				t.Errorf("bytes held = %d, limit %d", h, limit)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for i := 0; i < 150; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(5000))*time.Microsecond)
				r, _, err := b.Reserve(ctx, int64(rng.IntN(1500)))
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Reserve: %v", err)
					}
					continue
				}
				held.Add(r.Bytes())
				for j := rng.IntN(3); j > 0; j-- {
					before := r.Bytes()
					if r.TryGrow(before + int64(rng.IntN(400))) {
						held.Add(r.Bytes() - before)
					} else if r.Bytes() != before {
						t.Errorf("failed TryGrow changed bytes")
					}
					if rng.IntN(2) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
				}
				held.Add(-r.Bytes())
				r.Release()
				if rng.IntN(4) == 0 {
					r.Release()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	samplerWG.Wait()
	if b.Reserved() != 0 || b.Waiting() != 0 || held.Load() != 0 {
		t.Fatalf("after hammer: Reserved = %d, Waiting = %d, held = %d", b.Reserved(), b.Waiting(), held.Load())
	}
	r, w, err := b.Reserve(context.Background(), limit)
	if err != nil || w != 0 || r.Bytes() != limit {
		t.Fatalf("budget not whole after hammer: %v, %v, %v", r.Bytes(), w, err)
	}
	r.Release()
}
