package store

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitFor polls cond until it holds or a generous deadline passes (the -race detector on two
// cores can be slow; the deadline only bounds a failure, never a pass).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, "timed out waiting for %s", what)
}

// waitQueued waits until n Reserve calls count as waiting and the first of them is in the
// semaphore's queue. Waiting() counts a call just before it joins the queue, and until it
// has, a TryGrow or a smaller Reserve can still take free bytes ahead of it. TryAcquire(0)
// takes nothing and succeeds only while the queue is empty.
func waitQueued(t *testing.T, b *Budget, n int, what string) {
	t.Helper()
	waitFor(t, what, func() bool { return b.Waiting() == n && !b.sem.TryAcquire(0) })
}

func mustReserve(t *testing.T, b *Budget, want int64) *Reservation {
	t.Helper()
	r, _, err := b.Reserve(context.Background(), want)
	require.NoError(t, err, "Reserve(%d)", want)
	return r
}

// requireReserved reserves want bytes of b, which must be granted at once.
func requireReserved(t *testing.T, b *Budget, want int64) *Reservation {
	t.Helper()
	r, waited, err := b.Reserve(context.Background(), want)
	require.NoError(t, err, "Reserve(%d)", want)
	require.Zero(t, waited, "Reserve(%d) waited", want)
	require.Equal(t, want, r.Bytes())
	return r
}

// reserveErr is the error of a Reserve that must be refused.
func reserveErr(ctx context.Context, b *Budget, want int64) error {
	_, _, err := b.Reserve(ctx, want)
	return err
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
	require.NoError(t, res.err, "%s Reserve", what)
	require.Equal(t, want, res.r.Bytes(), "%s Reserve", what)
	return res
}

// requireBudget fails unless b has reserved bytes out and waiting requests queued.
func requireBudget(t *testing.T, b *Budget, reserved, waiting int) {
	t.Helper()
	require.Equal(t, [2]int64{int64(reserved), int64(waiting)}, [2]int64{b.Reserved(), int64(b.Waiting())}, "Reserved, Waiting")
}

func TestBudgetReserveRelease(t *testing.T) {
	b := NewBudget(100)
	require.EqualValues(t, 100, b.Limit())
	r := requireReserved(t, b, 30)
	r2 := mustReserve(t, b, 70)
	requireBudget(t, b, 100, 0)
	r.Release()
	r.Release() // idempotent: must not give back 30 twice
	requireBudget(t, b, 70, 0)
	require.Zero(t, r.Bytes())
	require.False(t, r.TryGrow(10), "a released reservation grew")
	r2.Release()
	requireBudget(t, b, 0, 0)
	// The whole limit is available again, without waiting.
	requireReserved(t, b, 100).Release()

	// Zero and invalid sizes.
	z := requireReserved(t, b, 0)
	requireBudget(t, b, 0, 0)
	require.True(t, z.TryGrow(5), "a zero reservation could not grow")
	require.EqualValues(t, 5, z.Bytes())
	requireBudget(t, b, 5, 0)
	z.Release()
	require.ErrorIs(t, reserveErr(context.Background(), b, -1), ErrInvalidInput)
	requireBudget(t, b, 0, 0)
}

// TestBudgetUnlimited: nil and zero-limit budgets never wait and never refuse.
func TestBudgetUnlimited(t *testing.T) {
	for name, b := range map[string]*Budget{"nil": nil, "zero": NewBudget(0), "negative": NewBudget(-5)} {
		t.Run(name, func(t *testing.T) {
			r := requireReserved(t, b, 1<<40)
			r2 := mustReserve(t, b, 1<<40)
			require.True(t, r.TryGrow(1<<50))
			require.EqualValues(t, 1<<50, r.Bytes())
			require.Zero(t, b.Limit())
			require.Zero(t, b.Waiting())
			r.Release()
			r2.Release()
			r.Release()
			requireBudget(t, b, 0, 0)
		})
	}
	var nr *Reservation
	nr.Release()
	require.Zero(t, nr.Bytes())
	require.False(t, nr.TryGrow(1), "a nil reservation grew")
}

// TestBudgetExhaustedWaitsAndResumes: with the budget full the next Reserve blocks, shows in
// Waiting(), and resumes as soon as bytes are released, reporting how long it waited.
func TestBudgetExhaustedWaitsAndResumes(t *testing.T) {
	b := NewBudget(100)
	holder := mustReserve(t, b, 100)
	start := time.Now()
	ch := reserveAsync(context.Background(), b, 10)
	waitQueued(t, b, 1, "the reservation to queue")
	expectBlocked(t, ch, 150*time.Millisecond)
	holder.Release()
	res := receiveBytes(t, ch, "resumed", 10)
	require.GreaterOrEqual(t, res.waited, 100*time.Millisecond)
	require.LessOrEqual(t, res.waited, time.Since(start))
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
	waitQueued(t, b, 1, "the reservation to queue")
	// A small request queues behind the big one (FIFO) ...
	small := reserveAsync(context.Background(), b, 30)
	waitQueued(t, b, 2, "the second reservation to queue")
	cancel()
	res := receive(t, big)
	require.ErrorIs(t, res.err, context.Canceled)
	require.Nil(t, res.r)
	// ... and proceeds once the cancelled request leaves the queue.
	sres := receiveBytes(t, small, "small", 30)
	requireBudget(t, b, 90, 0)
	holder.Release()
	sres.r.Release()
	requireBudget(t, b, 0, 0)
	// An already-cancelled context fails at once even if bytes are free.
	require.ErrorIs(t, reserveErr(ctx, b, 1), context.Canceled)
	// Deadline while waiting.
	holder = mustReserve(t, b, 100)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	require.ErrorIs(t, reserveErr(dctx, b, 1), context.DeadlineExceeded)
	holder.Release()
	requireReserved(t, b, 100).Release()
}

// TestBudgetOversizedRunsAlone: a request above the limit is clamped to the limit, waits
// until the budget is idle, then holds all of it; later requests queue behind it.
func TestBudgetOversizedRunsAlone(t *testing.T) {
	b := NewBudget(100)
	a := mustReserve(t, b, 30)
	c := mustReserve(t, b, 30)
	big := reserveAsync(context.Background(), b, 500)
	waitQueued(t, b, 1, "the oversized request to queue")
	later := reserveAsync(context.Background(), b, 10) // 40 free, but FIFO puts it behind
	waitQueued(t, b, 2, "the later request to queue")
	a.Release()
	expectBlocked(t, big, 50*time.Millisecond)
	c.Release()
	res := receiveBytes(t, big, "oversized", 100)
	expectBlocked(t, later, 50*time.Millisecond)
	// Holding the whole limit, it may "grow" past it (nothing more is taken).
	require.True(t, res.r.TryGrow(1000))
	require.EqualValues(t, 100, res.r.Bytes())
	requireBudget(t, b, 100, 1)
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
				assert.False(t, h.TryGrow(25), "TryGrow succeeded on a full budget")
				// A wait would be for a release, which comes only after every TryGrow.
				assert.LessOrEqual(t, time.Since(start), 10*time.Second, "TryGrow must never wait")
				assert.EqualValues(t, 10, h.Bytes(), "a failed TryGrow changed the reservation")
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
	for _, c := range []struct{ grow, want int64 }{{30, 30}, {1000, 60}, {20, 60}} {
		require.True(t, r.TryGrow(c.grow), "TryGrow(%d)", c.grow)
		require.Equal(t, c.want, r.Bytes(), "TryGrow(%d)", c.grow)
	}
	requireBudget(t, b, 60, 0)
	r.Release()
}

// TestBudgetQueuedReserveDoesNotBlockGrowingHolder: a holder that wants to grow while an
// initial Reserve is queued is refused at once (even if the bytes would fit: FIFO), commits
// what it has and releases, which lets the queued request through. No cycle, no deadlock.
func TestBudgetQueuedReserveDoesNotBlockGrowingHolder(t *testing.T) {
	b := NewBudget(100)
	holder := mustReserve(t, b, 40)
	queued := reserveAsync(context.Background(), b, 100)
	waitQueued(t, b, 1, "the initial reservation to queue")
	finished := make(chan bool, 1)
	go func() {
		grew := holder.TryGrow(60) // 60 free, but a waiter is queued
		holder.Release()
		finished <- grew
	}()
	select {
	case grew := <-finished:
		require.False(t, grew, "TryGrow overtook a queued Reserve")
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
			if r, h := b.Reserved(), held.Load(); !assert.True(t, r >= 0 && r <= limit && h <= limit,
				"Reserved() = %d, bytes held = %d, limit %d", r, h, limit) {
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
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					continue
				}
				held.Add(r.Bytes())
				for j := rng.IntN(3); j > 0; j-- {
					before := r.Bytes()
					if r.TryGrow(before + int64(rng.IntN(400))) {
						held.Add(r.Bytes() - before)
					} else {
						assert.Equal(t, before, r.Bytes(), "a failed TryGrow changed bytes")
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
	requireBudget(t, b, 0, 0)
	require.Zero(t, held.Load())
	requireReserved(t, b, limit).Release()
}
