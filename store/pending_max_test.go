package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// PendingMax bounds every write path of a shard: concurrent seal-on-append writers stop at
// exactly the limit (admitWrite reserves what each may seal, so none passes a check that
// only another fits), and appends and deletes of any store are refused there.
func TestPendingMaxBoundsEveryWrite(t *testing.T) {
	ctx := context.Background()
	const limit = 5
	url := fmt.Sprintf("mem://pendingmax-%d", testURLSeq.Add(1))
	db := openTestDB(t, url, "w", func(o *Options) { o.PendingMax = limit; o.PendingWarn = 0 })

	t.Run("seal on append, concurrent writers", func(t *testing.T) {
		s := createGeneric(t, db, "sealed", true)
		var wg sync.WaitGroup
		var mu sync.Mutex
		refused := 0
		for g := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					_, err := s.Append(ctx, []Row{row(fmt.Sprintf("g%02d-%03d", g, i), int64(i))})
					if errors.Is(err, ErrTooManyPending) {
						mu.Lock()
						refused++
						mu.Unlock()
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, 16, refused)
		require.Equal(t, limit, call(s.Stats(ctx)).must(t).TotalPending(), "the writers stop exactly at the limit")
		require.Equal(t, limit, s.OwnPending())
		require.ErrorIs(t, s.Delete(ctx, "g00-000"), ErrTooManyPending)
		require.NoError(t, errOf(s.List(ctx, ListOptions{})), "a shard at the limit is still readable")
	})

	t.Run("memtable store", func(t *testing.T) {
		s := createGeneric(t, db, "memtable", false)
		for i := range limit - 1 {
			seal(t, s, row(fmt.Sprintf("k%d", i), 1))
		}
		appendRows(t, s, row("last", 1)) // admitted below the limit
		require.NoError(t, s.Delete(ctx, "k0"))
		flush(t, s)
		require.Equal(t, limit, s.OwnPending())
		require.ErrorIs(t, errOf(s.Append(ctx, []Row{row("late", 1)})), ErrTooManyPending)
		require.ErrorIs(t, s.Delete(ctx, "k1"), ErrTooManyPending)
		require.ErrorIs(t, errOf(s.AppendJSON(ctx, []byte(`[{"id":"late"}]`))), ErrTooManyPending)
		// At the limit a body is refused before it is measured: one too large to decode
		// gets the debt answer, not the size one, and costs no decoding.
		huge := []byte("[" + strings.Repeat(`{"id":"x"},`, db.opts.MaxAppendRows) + `{"id":"y"}]`)
		require.ErrorIs(t, errOf(s.AppendJSON(ctx, huge)), ErrTooManyPending)
	})

	t.Run("a seal stops at the limit", func(t *testing.T) {
		s := createGeneric(t, db, "sealstop", false)
		seal(t, s, row("a", 1))
		appendRows(t, s, row("b", 1))
		// Rows admitted below the limit stay unsealed while the shard is at it: readable
		// here, durable in the WAL, sealed once merges make room.
		db.opts.PendingMax = 1
		res := flush(t, s)
		require.False(t, res.Sealed)
		require.Equal(t, 1, res.Pending)
		require.Equal(t, int64(1), call(s.Get(ctx, "b")).must(t)["n"])
		db.opts.PendingMax = limit
		require.True(t, flush(t, s).Sealed)
	})
}

// TestFindingPendingMaxHoldsAfterARemoteMerge: a shard held at PendingMax is drained by a
// merge that commits in another process (CommitRound runs on the shared queue, on any
// worker). The owner must then take appends and seal again; it judged the limit by the
// manifest of its own last seal, which a remote drain never updates, and no seal ran to
// update it while that manifest said the shard was full.
func TestFindingPendingMaxHoldsAfterARemoteMerge(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	url := fmt.Sprintf("mem://pendingmax-remote-%d", testURLSeq.Add(1))
	var later atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	owner := openTestDB(t, url, "owner", func(o *Options) { o.PendingMax = limit; o.PendingWarn = 0; o.Now = clock })
	merger := openTestDB(t, url, "merger", func(o *Options) { o.PendingMax = limit; o.PendingWarn = 0 })
	mergeRemotely := func(name string) {
		t.Helper()
		res := call(openGeneric(t, merger, name).MergeOnce(ctx, owner.Shard())).must(t)
		require.Equal(t, limit, res.Reclaimed)
		later.Add(int64(manifestRefreshEvery)) // the owner's refused write read the manifest just now
	}

	t.Run("appends", func(t *testing.T) {
		s := createGeneric(t, owner, "appends", false)
		sealGenerations(t, s, limit)
		_, err := s.Append(ctx, []Row{row("refused", 1)})
		require.ErrorIs(t, err, ErrTooManyPending, "the shard is at the limit")
		mergeRemotely("appends")
		_, err = s.Append(ctx, []Row{row("after", 1)})
		require.NoError(t, err, "the remote merge drained the shard: appends are taken again")
		require.NoError(t, s.Delete(ctx, "k0"))

		sealGenerations(t, s, limit) // at the limit again
		require.ErrorIs(t, errOf(s.AppendJSON(ctx, []byte(`[{"id":"refused"}]`))), ErrTooManyPending)
		mergeRemotely("appends")
		_, err = s.AppendJSON(ctx, []byte(`[{"id":"json"}]`))
		require.NoError(t, err, "the body's early check reads the latest manifest too")
	})

	t.Run("seals", func(t *testing.T) {
		s := createGeneric(t, owner, "seals", false)
		owner.opts.PendingMax = limit + 1
		sealGenerations(t, s, limit)
		appendRows(t, s, row("waiting", 1)) // admitted below the limit, which is then met
		owner.opts.PendingMax = limit
		require.False(t, flush(t, s).Sealed, "a seal stops at the limit")
		mergeRemotely("seals")
		require.True(t, flush(t, s).Sealed, "the remote merge made room: the flush seals what waited")
		requireGetN(t, openGeneric(t, merger, "seals"), "waiting", 1, "sealed, so every process reads it")
		require.Equal(t, 1, s.OwnPending())
	})
}

// Clients retrying writes a full shard refuses cost storage at most one manifest read a second
// between them, not one per refused write.
func TestRefusedWritesReadTheManifestAtMostOnceASecond(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	url := fmt.Sprintf("mem://pendingmax-rate-%d", testURLSeq.Add(1))
	var later atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	db := openTestDB(t, url, "owner", func(o *Options) { o.PendingMax = limit; o.PendingWarn = 0; o.Now = clock })
	s := createGeneric(t, db, "full", false)
	sealGenerations(t, s, limit)
	var gets atomic.Int64
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if strings.Contains(key, "/manifest/") {
			gets.Add(1)
		}
		return nil
	}})
	for range 100 {
		require.ErrorIs(t, errOf(s.Append(ctx, []Row{row("refused", 1)})), ErrTooManyPending)
	}
	first := gets.Load()
	require.Positive(t, first, "a refused write reads the manifest once")
	require.LessOrEqual(t, first, int64(4), "100 refused writes within a second read it once")
	later.Add(int64(manifestRefreshEvery))
	require.ErrorIs(t, errOf(s.Append(ctx, []Row{row("refused", 1)})), ErrTooManyPending)
	require.Greater(t, gets.Load(), first, "a second later a refused write reads it again")
}

// A List of the base alone (source=base) reads no pending generation, so a store past
// --pending-max still answers it: it was refused ErrTooManyPending (503 too_many_pending),
// the read an operator of a store in debt looks at, while reads of the pending rows are refused.
func TestFindingBaseListOfAStoreInDebtIsNotRefused(t *testing.T) {
	ctx := context.Background()
	url := "mem://" + t.Name()
	_, s := newGenericStore(t, url, "debt")
	seal(t, s, row("a", 1))
	call(s.MergeAll(ctx)).must(t)
	seal(t, s, row("b", 2))
	seal(t, s, row("c", 3))
	rdb := openTestDB(t, url, "reader", func(o *Options) { o.PendingMax = 1 })
	r := openGeneric(t, rdb, "debt")
	require.ErrorIs(t, errOf(r.List(ctx, ListOptions{})), ErrTooManyPending, "a read of the pending rows is refused")
	page := call(r.List(ctx, ListOptions{Source: SourceBase})).must(t)
	require.Len(t, page.Rows, 1)
	require.Equal(t, "a", page.Rows[0]["id"])
}
