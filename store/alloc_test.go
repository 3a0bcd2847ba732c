package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// peakAlloc is a memAccount as an Arrow allocator that remembers the most bytes the account
// had handed out at once.
type peakAlloc struct {
	*memAccount
	peak atomic.Int64
}

func newPeakAlloc(a *memAccount) *peakAlloc { return &peakAlloc{memAccount: a} }

func (p *peakAlloc) Allocate(size int) []byte {
	b := p.memAccount.Allocate(size)
	total := p.Allocated()
	for old := p.peak.Load(); total > old && !p.peak.CompareAndSwap(old, total); old = p.peak.Load() {
	}
	return b
}

// Reallocate is memAccount.Reallocate through p's Allocate, so the peak holds both buffers.
func (p *peakAlloc) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Peak returns the most bytes the account had handed out at once through p.
func (p *peakAlloc) Peak() int64 { return p.peak.Load() }

// Pooled returns the bytes of freed buffers the budget keeps for reuse.
func (b *Budget) Pooled() int64 {
	if b == nil || b.pool == nil {
		return 0
	}
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return b.pool.bytes
}

func TestBufferClasses(t *testing.T) {
	prev := 0
	for c := 0; c < 80; c++ {
		sz := classSize(c)
		require.Greater(t, sz, prev, "class sizes ascend")
		require.Equal(t, c, classOf(sz), "classOf(classSize(%d))", c)
		require.Equal(t, c, classOf(prev+1), "smallest size of class %d", c)
		if c > 4 {
			require.LessOrEqual(t, float64(sz)/float64(prev), 1.26, "rounding of class %d", c)
		}
		prev = sz
	}
	require.Equal(t, 0, classOf(0))
	require.Equal(t, 0, classOf(1))
}

func TestMemAccountChargesAndCredits(t *testing.T) {
	b := NewBudget(64 << 20)
	res := mustReserve(t, b, 8<<20)
	defer res.Release()
	a := newMemAccount(res, b)
	var mem memory.Allocator = a

	small := mem.Allocate(100)
	require.Len(t, small, 100)
	big := mem.Allocate(1 << 20)
	require.Len(t, big, 1<<20)
	require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(big)))%bufAlignment, "aligned")
	require.Equal(t, make([]byte, len(big)), big, "zeroed")
	require.Equal(t, int64(cap(small)+cap(big)), a.Allocated())
	require.Equal(t, a.Allocated(), b.Allocated())

	big[0] = 7
	big = mem.Reallocate(2<<20, big)
	require.Equal(t, byte(7), big[0], "contents kept")
	mem.Free(big)
	mem.Free(small)
	require.Zero(t, a.Allocated())
	require.Zero(t, b.Allocated())
	require.NoError(t, a.err())
	require.Positive(t, b.Pooled(), "freed buffers are kept for reuse")

	// A reused buffer is zeroed again.
	again := mem.Allocate(2 << 20)
	require.Equal(t, make([]byte, len(again)), again, "zeroed")
	mem.Free(again)
}

func TestMemAccountBufferRefusesInsteadOfWaiting(t *testing.T) {
	b := NewBudget(4 << 20)
	res := mustReserve(t, b, 1<<20)
	other := mustReserve(t, b, 3<<20) // the rest of the budget: growth cannot succeed
	a := newMemAccount(res, b)

	buf, ok := a.buffer(512<<10, 0)
	require.True(t, ok)
	_, ok = a.buffer(1<<20, 0)
	require.False(t, ok, "beyond the reservation, with nothing free: refused")
	require.Equal(t, int64(cap(buf)), a.Allocated(), "a refused buffer charges nothing")

	rbuf := a.readBuffer(0)
	require.ErrorIs(t, errOf(rbuf.alloc(2<<20)), ErrBudgetBusy)
	rbuf.free()

	other.Release()
	big, ok := a.buffer(2<<20, 0)
	require.True(t, ok, "grows without waiting once the bytes are free")
	a.Free(big)
	a.Free(buf)
	require.Zero(t, a.Allocated())
	res.Release()
	require.LessOrEqual(t, b.Pooled(), b.Limit())
}

func TestMemAccountOverdraftIsBudgetBusy(t *testing.T) {
	b := NewBudget(4 << 20)
	res := mustReserve(t, b, 1<<20)
	other := mustReserve(t, b, 3<<20)
	defer other.Release()
	a := newMemAccount(res, b)
	if allocCheck {
		// Race builds (the project's test command) panic on the same overdraft instead of
		// recording it; a skip here would leave the overdraft unchecked there.
		require.Panics(t, func() { a.Allocate(2 << 20) }, "race build: an overdraft must panic (allocCheck)")
		res.Release()
		return
	}
	x := a.Allocate(2 << 20) // Arrow cannot be refused: recorded
	require.ErrorIs(t, a.err(), ErrBudgetBusy)
	a.Free(x)
	res.Release()
}

func TestBufferPoolStaysWithinLimit(t *testing.T) {
	b := NewBudget(8 << 20)
	res := mustReserve(t, b, 8<<20)
	a := newMemAccount(res, b)
	var bufs [][]byte
	for i := 0; i < 7; i++ {
		bufs = append(bufs, a.Allocate(1<<20))
	}
	for _, x := range bufs {
		a.Free(x)
	}
	res.Release()
	require.LessOrEqual(t, b.Pooled()+b.Allocated(), b.Limit())

	// Other sizes than the pool keeps: the fresh allocation trims the pool to make room.
	res = mustReserve(t, b, 8<<20)
	a = newMemAccount(res, b)
	y := a.Allocate(5 << 20)
	require.LessOrEqual(t, b.Pooled()+b.Allocated(), b.Limit())
	a.Free(y)
	res.Release()
}

// TestConcurrentMergesTinyBudgetNeverDeadlock runs many merges at once against budgets far
// smaller than their inputs (one that makes every merge a lone whole-limit holder, one that
// fits two merges and refuses their growth). Every merge must end, each store must drain,
// reserved bytes never exceed the budget and allocated bytes never exceed the reservations
// (in race builds the allocator panics on an overdraft), all in bounded time.
func TestConcurrentMergesTinyBudgetNeverDeadlock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int64
		maxBytes int64
	}{
		{"lone holders", 1 << 20, 0},
		{"prefix under contention", 48 << 20, 512 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const stores, gens = 6, 5
			budget := NewBudget(tc.limit)
			db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w", func(o *Options) {
				o.Budget = budget
				o.MergeMaxBytes = tc.maxBytes
				o.MergeMaxGenerations = 0
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var ss []*Store
			for i := range stores {
				s := createGeneric(t, db, fmt.Sprintf("dl%d", i), false)
				for g := range gens {
					var batch []Row
					for r := range 120 {
						k := fmt.Sprintf("k%05d", r*gens+g)
						batch = append(batch, keyRow(k, int64(r), string(make([]byte, 1500))))
					}
					seal(t, s, batch...)
				}
				ss = append(ss, s)
			}

			stop := make(chan struct{})
			var sampler sync.WaitGroup
			var maxReserved atomic.Int64
			sampler.Add(1)
			go func() {
				defer sampler.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
					maxReserved.Store(max(maxReserved.Load(), budget.Reserved()))
				}
			}()
			var wg sync.WaitGroup
			var busy atomic.Int64
			for w := range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := ss[w%stores]
					for ctx.Err() == nil {
						p, err := s.Prepare(ctx, PrepareParams{})
						if errors.Is(err, ErrBudgetBusy) {
							busy.Add(1)
							time.Sleep(time.Millisecond)
							continue
						}
						if err != nil || p == nil {
							if err != nil && !errors.Is(err, ErrStalePreparation) {
								t.Errorf("prepare: %v", err)
							}
							return
						}
						if _, err := commitOne(ctx, s, p); err != nil && !errors.Is(err, ErrStalePreparation) {
							t.Errorf("commit: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			sampler.Wait()
			require.NoError(t, ctx.Err(), "merges did not finish in time")
			for _, s := range ss {
				st := call(s.Stats(ctx)).must(t)
				for _, sh := range st.Shards {
					require.Zero(t, sh.PendingGenerations, "store %s drained", st.Target)
				}
				require.Equal(t, int64(120*gens), st.Rows)
			}
			require.LessOrEqual(t, maxReserved.Load(), tc.limit)
			require.Zero(t, budget.Reserved())
			require.Zero(t, budget.Allocated(), "every buffer returned")
			require.LessOrEqual(t, budget.Pooled(), tc.limit)
			t.Logf("max reserved %d of %d, %d busy refusals", maxReserved.Load(), tc.limit, busy.Load())
		})
	}
}
