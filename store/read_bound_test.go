package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
			k := fmt.Sprintf("k%04d", rng.IntN(600))
			n++
			batch = append(batch, row(k, n))
			want[k] = n
		}
		_, err := s.Append(ctx, batch)
		require.NoError(t, err)
		if g%5 == 4 {
			k := fmt.Sprintf("k%04d", rng.IntN(600))
			require.NoError(t, s.Delete(ctx, k))
			delete(want, k)
		}
		if g < gens { // the last batch stays in the memtable
			_, err = s.Flush(ctx)
			require.NoError(t, err)
		}
	}
	return s, want
}

func TestListAndGetOverManyGenerationsAreBounded(t *testing.T) {
	ctx := context.Background()
	s, want := boundedReadStore(t, 3*readFanIn+7, func(o *Options) { o.ReadBudget = NewBudget(4 << 20) })
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Greater(t, st.Shards[0].PendingGenerations, readFanIn, "more generations than one group")

	for _, limit := range []int{1, 7, 100, 10000} {
		got := map[string]int64{}
		after, pages, prev := "", 0, ""
		for {
			page, err := s.List(ctx, ListOptions{Limit: limit, After: after})
			require.NoError(t, err)
			pages++
			for _, r := range page.Rows {
				k := r["id"].(string)
				require.Greater(t, k, prev, "key order")
				prev = k
				got[k] = r["n"].(int64)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
			require.Less(t, pages, 2000)
		}
		require.Equal(t, want, got, "limit %d", limit)
	}
	for k, n := range want {
		r, err := s.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, n, r["n"], k)
	}
	_, err = s.Get(ctx, "k9999")
	require.ErrorIs(t, err, ErrNotFound)
	require.Zero(t, s.db.opts.ReadBudget.Reserved(), "reads release the read budget")
}

func TestReadBudgetBusy(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(1 << 20)
	s, _ := boundedReadStore(t, 3, func(o *Options) { o.ReadBudget = rb; o.CacheBytes = 1 })
	held := mustReserve(t, rb, 1<<20)
	start := time.Now()
	_, err := s.List(ctx, ListOptions{})
	require.ErrorIs(t, err, ErrBudgetBusy, "a read that cannot fit waits briefly, then is refused")
	require.Less(t, time.Since(start), readBudgetWait+5*time.Second)
	held.Release()
	_, err = s.List(ctx, ListOptions{})
	require.NoError(t, err)
}
