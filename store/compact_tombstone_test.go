package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// tombstonesSettle is how far a test runs a compacting process's clock ahead once its deletes
// are written, so that the rule the test checks, and not the tombstones' youth
// (settledSeqBound), decides which of them a compaction keeps.
const tombstonesSettle = walAckWindow + clockSkewAllowance + time.Minute

// deleteOverAnUnsealedRow makes a store with two writers: w2 holds k = 2 acknowledged but
// unsealed (its memtable and WAL only), and w1's later delete of k is sealed and merged into a
// base that also has a run of "other". w1's clock then runs tombstonesSettle ahead.
func deleteOverAnUnsealedRow(t *testing.T, name string) (db1, db2 *DB, s1, s2 *Store) {
	t.Helper()
	ctx := context.Background()
	url := newMemURL()
	var ahead atomic.Int64
	db1 = openTestDB(t, url, "w1", aheadClock(&ahead))
	s1 = createGeneric(t, db1, name, false)
	db2 = openTestDB(t, url, "w2")
	s2 = openGeneric(t, db2, name)
	seal(t, s1, row("other", 1))
	call(s1.MergeAll(ctx)).must(t)
	appendRows(t, s2, row("k", 2))
	require.NoError(t, s1.Delete(ctx, "k"))
	flush(t, s1)
	call(s1.MergeAll(ctx)).must(t)
	ahead.Store(int64(tombstonesSettle))
	return db1, db2, s1, s2
}

// A compaction must not drop a tombstone that still hides an older row no generation holds
// yet: another writer's row written before the delete and still in its memtable (and WAL)
// is sealed after the compaction, and without the tombstone it would come back.
func TestCompactionKeepsTombstonesOverUnsealedRows(t *testing.T) {
	ctx := context.Background()
	_, _, s1, s2 := deleteOverAnUnsealedRow(t, "tomb")
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "the delete came after the write")

	call(s1.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	flush(t, s2)
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "a row older than the delete must not come back")
	call(s1.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "a row older than the delete must not come back")
}

// A seal of another writer between the compaction's snapshot and its listing of that
// writer's WAL deletes the WAL objects the listing was to find, and the sealed generation is
// not among the snapshot's pending ones: the row it holds is still older than the tombstone.
func TestCompactionKeepsTombstonesOverRowsSealedDuringItsListing(t *testing.T) {
	ctx := context.Background()
	db1, db2, s1, s2 := deleteOverAnUnsealedRow(t, "tombseal")

	var armed atomic.Bool
	armed.Store(true)
	db1.bucket = db1.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpList && key == walPrefix(s1.target, db2.Shard()) && armed.CompareAndSwap(true, false) {
			require.NoError(t, errOf(s2.Flush(ctx))) // w2 seals and deletes its WAL just before the listing
		}
		return nil
	}})
	call(s1.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.False(t, armed.Load(), "the compaction listed w2's WAL")
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "a row older than the delete must not come back")
	call(s1.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "a row older than the delete must not come back")
}

// A write of another writer sequenced before a delete but not landed when a compaction lists
// that writer's WAL is seen by no listing or manifest: the pass keeps the tombstone because it
// is younger than a write still in flight may be when it is acknowledged, and the row, once it
// lands and is merged, stays hidden behind it.
func TestCompactionKeepsTombstonesOverWritesInFlight(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db1 := openTestDB(t, url, "w1")
	s1 := createGeneric(t, db1, "inflight", false)
	db2 := openTestDB(t, url, "w2")
	s2 := openGeneric(t, db2, "inflight")
	seal(t, s1, row("other", 1))
	seal(t, s2, row("w2", 1)) // w2 has claimed its shard, and has nothing unsealed or pending
	call(s1.MergeAll(ctx)).must(t)

	sequenced, land := make(chan struct{}), make(chan struct{})
	var landOnce sync.Once
	letLand := func() { landOnce.Do(func() { close(land) }) }
	t.Cleanup(letLand) // a failed check must not leave w2's writer held for ever
	var armed atomic.Bool
	armed.Store(true)
	db2.bucket = db2.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.HasPrefix(key, walPrefix(s2.target, db2.Shard())) && armed.CompareAndSwap(true, false) {
			close(sequenced) // w2's rows have their sequence; the put has not landed
			<-land
		}
		return nil
	}})
	appended := make(chan error, 1)
	go func() { appended <- errOf(s2.Append(ctx, []Row{row("k", 2)})) }()
	select {
	case <-sequenced:
	case err := <-appended:
		t.Fatalf("w2's append returned before its WAL put: %v", err)
	}
	require.NoError(t, s1.Delete(ctx, "k"))
	flush(t, s1)
	call(s1.MergeAll(ctx)).must(t)
	res := call(s1.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, res.Committed)
	require.Zero(t, res.DroppedDeletes, "the tombstone is younger than a write in flight may be")

	letLand()
	require.NoError(t, <-appended, "w2's write landed at once: it is acknowledged")
	flush(t, s2)
	call(s1.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "the delete came after the write")
	require.ErrorIs(t, errOf(s2.Get(ctx, "k")), ErrNotFound, "the delete came after the write")
}

// A writer that claims its shard after a compaction listed the store's shards is in none of
// the pass's reads, and its rows acknowledged at once are sequenced after that listing: the
// pass's clock, read before the listing, keeps every tombstone younger than them even when the
// rest of its snapshot takes longer than the settled bound.
func TestCompactionKeepsTombstonesOverShardsClaimedAfterItsListing(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	var ahead atomic.Int64 // one clock for every process: time passing
	db1 := openTestDB(t, url, "w1", aheadClock(&ahead))
	s1 := createGeneric(t, db1, "claimed", false)
	seal(t, s1, row("other", 1))
	call(s1.MergeAll(ctx)).must(t)

	dbc := openTestDB(t, url, "c", aheadClock(&ahead))
	sc := openGeneric(t, dbc, "claimed")
	var s3 *Store
	var armed atomic.Bool
	armed.Store(true)
	dbc.bucket = dbc.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op == objstore.OpListDirs && strings.HasPrefix(key, memWALPrefix(sc.target)) && armed.CompareAndSwap(true, false) {
			s3 = openGeneric(t, openTestDB(t, url, "w3", aheadClock(&ahead)), "claimed")
			appendRows(t, s3, row("k", 3)) // a new shard, acknowledged at once
			require.NoError(t, s1.Delete(ctx, "k"))
			flush(t, s1)
			call(s1.MergeAll(ctx)).must(t)
			ahead.Store(int64(tombstonesSettle)) // the rest of the snapshot takes that long
		}
		return err
	}})
	res := call(sc.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.False(t, armed.Load(), "the pass listed the shards")
	require.True(t, res.Committed)
	require.Zero(t, res.DroppedDeletes, "the tombstone is newer than a row of a shard the pass did not list")
	flush(t, s3)
	call(s1.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s1.Get(ctx, "k")), ErrNotFound, "the delete came after the write")
}

// Two executions of one compaction attempt (a worker still running an attempt that Temporal
// retried, or a reset run's) that read the same base version but decide differently which
// tombstones go (a seal landed between them) write different runs: the one whose publish
// fails must not delete or overwrite the run the other publishes.
func TestConcurrentTriesOfACompactionDoNotShareAnOutput(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	var ahead atomic.Int64 // the clock of both tries
	db1 := openTestDB(t, url, "w1", aheadClock(&ahead))
	s1 := createGeneric(t, db1, "twin", false)
	db2 := openTestDB(t, url, "w2")
	s2 := openGeneric(t, db2, "twin")
	db3 := openTestDB(t, url, "w3", aheadClock(&ahead))
	s3 := openGeneric(t, db3, "twin")

	seal(t, s1, row("other", 1))
	call(s1.MergeAll(ctx)).must(t)
	require.NoError(t, s1.Delete(ctx, "k"))
	flush(t, s1)
	call(s1.MergeAll(ctx)).must(t)
	appendRows(t, s2, row("z", 3)) // unsealed: the first try keeps the tombstone
	ahead.Store(int64(tombstonesSettle))

	db3.bucket = db3.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") {
			return errors.New("injected: base publish failed")
		}
		return nil
	}})
	var armed atomic.Bool
	armed.Store(true)
	db1.bucket = db1.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") && armed.CompareAndSwap(true, false) {
			require.NoError(t, errOf(s2.Flush(ctx))) // the second try sees the row pending, not unsealed
			require.Error(t, errOf(s3.CompactBase(ctx, CompactParams{MaxRuns: -1})), "the second try's publish fails")
		}
		return nil
	}})
	require.True(t, call(s1.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t).Committed)
	require.False(t, armed.Load(), "the second try ran")

	requireBaseReadable(t, s1) // the other try deleted no run the base names
	require.Equal(t, map[string]int64{"other": 1, "z": 3}, allRows(t, s1, SourceAll))
}
