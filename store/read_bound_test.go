package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// boundedReadKeys is the key space of boundedReadStore: small enough that a List of limit 1
// pages through it quickly over every generation (each page, and each Get of a key, reads
// every generation), large enough that pages cross generations.
const boundedReadKeys = 50

// boundedReadStore writes gens generations (more than readFanIn) of overlapping keys with
// updates and tombstones, plus unflushed memtable rows, and returns the expected newest
// value per live key.
func boundedReadStore(t *testing.T, gens int, tweak ...func(*Options)) (*Store, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w", tweak...)
	s := createGeneric(t, db, "rb", false)
	rng := rand.New(rand.NewPCG(7, 9))
	want := map[string]int64{}
	n := int64(0)
	for g := 0; g <= gens; g++ {
		var batch []Row
		for range 12 {
			k := fmt.Sprintf("k%04d", rng.IntN(boundedReadKeys))
			n++
			batch = append(batch, row(k, n))
			want[k] = n
		}
		call(s.Append(ctx, batch)).must(t)
		if g%5 == 4 {
			k := fmt.Sprintf("k%04d", rng.IntN(boundedReadKeys))
			require.NoError(t, s.Delete(ctx, k))
			delete(want, k)
		}
		if g < gens { // the last batch stays in the memtable
			flush(t, s)
		}
	}
	return s, want
}

func TestListAndGetOverManyGenerationsAreBounded(t *testing.T) {
	t.Run("cached", func(t *testing.T) { testBoundedReads(t, 0) })
	// Cache off: every file is read into the read arena, whose buffers the next group
	// reuses, so rows, keys and cursors kept across pages prove they were copied out.
	t.Run("arena", func(t *testing.T) { testBoundedReads(t, 1) })
}

func testBoundedReads(t *testing.T, cacheBytes int64) {
	ctx := context.Background()
	rb := NewBudget(4 << 20)
	s, want := boundedReadStore(t, 3*readFanIn+7, func(o *Options) {
		o.ReadBudget = rb
		if cacheBytes > 0 {
			o.CacheBytes = cacheBytes
		}
	})
	require.Greater(t, call(s.Stats(ctx)).must(t).Shards[0].PendingGenerations, readFanIn, "more generations than one group")

	for _, limit := range []int{1, 7, 100, 10000} {
		require.Equal(t, want, listInKeyOrder(t, s, limit), "limit %d", limit)
	}
	for k, n := range want {
		require.Equal(t, n, call(s.Get(ctx, k)).must(t)["n"], k)
	}
	require.ErrorIs(t, errOf(s.Get(ctx, "k9999")), ErrNotFound)
	require.Zero(t, rb.Reserved(), "reads release the read budget")
	require.Zero(t, rb.Allocated(), "reads free their arenas")
	require.LessOrEqual(t, rb.Pooled(), rb.Limit(), "the pool keeps at most the budget")
}

func TestArenaEstimateCoversWhatTheArenaTakes(t *testing.T) {
	many := make([]int64, readFanIn)
	for i := range many {
		many[i] = int64(i)<<10 + 1
	}
	for _, requests := range [][]int64{{1}, {100}, {16 << 10, 16 << 10, 16 << 10}, {300 << 10, 10, 2 << 20}, many} {
		checkArenaWithinEstimate(t, requests, func(i int) int { return int(requests[i]) })
	}
}

// Any order of objects of any sizes up to their requests, as the group's concurrent loads
// take them, stays within arenaEstimate: chunk tails packing leaves unused included.
func TestArenaEstimateCoversAnyPackingOfRandomObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 89))
	for round := 0; round < 300; round++ {
		requests := make([]int64, 1+rng.IntN(readFanIn))
		widest := int64(1) << (10 + rng.IntN(9)) // 1 KiB up to a quarter chunk, sometimes past
		for i := range requests {
			requests[i] = 1 + rng.Int64N(widest+widest/8)
		}
		checkArenaWithinEstimate(t, requests, func(i int) int {
			if rng.IntN(4) == 0 {
				return 1 + rng.IntN(int(requests[i])) // an object smaller than its read limit
			}
			return int(requests[i])
		})
	}
}

// checkArenaWithinEstimate takes an object of size(i) bytes for each request, in a shuffled
// order, from an arena reserved its estimate, and fails if any needs more.
func checkArenaWithinEstimate(t *testing.T, requests []int64, size func(i int) int) {
	t.Helper()
	b := NewBudget(256 << 20)
	want := arenaEstimate(requests) + int64(len(requests))*decodedFileHeap
	res := mustReserve(t, b, want)
	a := newMemAccount(res, b)
	r := newReadArena(a, requests)
	for _, i := range rand.Perm(len(requests)) {
		n := size(i)
		alloc := r.alloc(requests[i])
		buf, err := alloc(n)
		require.NoError(t, err, "requests %v: object %d of %d bytes", requests, i, n)
		require.Equal(t, n, cap(buf))
	}
	// Nothing is freed before r.free, so what the arena holds now is its peak.
	require.LessOrEqual(t, a.Allocated(), want, "requests %v: the arena stays within its estimate", requests)
	require.Equal(t, want, res.Bytes(), "requests %v: the reservation did not grow", requests)
	r.free()
	require.Zero(t, a.Allocated())
	require.Zero(t, b.Allocated())
	res.Release()
}

func TestReadBudgetBusy(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(1 << 20)
	s, _ := boundedReadStore(t, 3, func(o *Options) { o.ReadBudget = rb; o.CacheBytes = 1 })
	held := mustReserve(t, rb, 1<<20)
	start := time.Now()
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{})), ErrBudgetBusy, "a read that cannot fit waits briefly, then is refused")
	require.Less(t, time.Since(start), readBudgetWait+30*time.Second, "refused after its brief wait, not held until the budget frees")
	held.Release()
	call(s.List(ctx, ListOptions{})).must(t)
}
