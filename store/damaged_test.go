package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/requestcount"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// damagedWALStore leaves store name on a file:// root with two acknowledged appends and
// the second one's WAL object damaged, unsealed (no Close: the next DB with instance w1 is
// the restarted owner), and returns the root, the store's target, the damaged key and its
// intact bytes.
func damagedWALStore(t *testing.T, name string) (root string, tgt Target, key string, intact []byte) {
	t.Helper()
	ctx := context.Background()
	root = "file://" + t.TempDir()
	db, s := newGenericStore(t, root, name)
	appendRows(t, s, row("a", 1))
	appendRows(t, s, row("b", 2))
	key, intact = lastWAL(t, db, s)
	require.NoError(t, db.bucket.Put(ctx, key, flipMiddleBit(intact)))
	return root, s.target, key, intact
}

// openCountedDB opens a DB for instance w1 on root whose every storage request goes through
// faults (a counter, say).
func openCountedDB(t *testing.T, root string, faults objstore.Faults) *DB {
	t.Helper()
	b := call(objstore.OpenBucket(context.Background(), root)).must(t)
	opts := DefaultOptions()
	opts.InstanceID = "w1"
	db := OpenDBOnBucket(b.WithFaults(faults), opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// A client retrying appends against a shard whose WAL object is damaged gets ErrCorrupt
// every time, and only the first try claims the shard: the retries write nothing, where each
// used to publish a shard manifest with a new writer epoch. Once the object is repaired the
// next append claims the shard, replays it and succeeds.
func TestDamagedWALRetriedAppendsWriteNothing(t *testing.T) {
	ctx := context.Background()
	root, tgt, key, intact := damagedWALStore(t, "dw")
	rc := &requestcount.Counter{}
	db := openCountedDB(t, root, rc)
	s := openGeneric(t, db, "dw")
	manifests := func() int {
		objs := call(db.bucket.List(ctx, shardManifestPrefix(tgt, db.Shard()))).must(t)
		return len(objs)
	}
	before := manifests()

	_, err := s.Append(ctx, []Row{row("c", 3)})
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), key)
	claimed := rc.Counts()
	for i := 0; i < 20; i++ {
		_, err = s.Append(ctx, []Row{row("c", 3)})
		require.ErrorIs(t, err, ErrCorrupt, "append %d", i)
		require.Contains(t, err.Error(), key)
	}
	retries := rc.Counts().Sub(claimed)
	require.Zero(t, retries.Put+retries.PutIfAbsent+retries.Delete, "20 retried appends wrote: %+v", retries)
	require.LessOrEqual(t, manifests()-before, 1, "one claim at most, not one manifest version per append")

	require.NoError(t, db.bucket.Put(ctx, key, intact))
	appendRows(t, s, row("c", 3))
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceAll))
}

// walkeeper_corrupt_objects_total counts each damaged object once per process, however often
// it is read: a client retrying a read must not make the counter measure its retries. The
// bounded set forgets the oldest key past damagedMax, so memory stays bounded too.
func TestCorruptObjectsAreCountedOncePerObject(t *testing.T) {
	ctx := context.Background()
	db, s, m := mergedStore(t, newMemURL())
	corrupt := m.CorruptObjects.WithLabelValues(string(KindGeneric))
	base := call(s.loadBase(ctx)).must(t)
	sm := call(s.loadShard(ctx, db.Shard())).must(t)
	require.NoError(t, db.bucket.Put(ctx, base.Runs[0].Path, []byte("garbage")))
	require.NoError(t, db.bucket.Put(ctx, sm.Flushed[0].Path, []byte("garbage")))
	db.cache.clear()
	for i := 0; i < 5; i++ {
		require.ErrorIs(t, errOf(s.Get(ctx, "a")), ErrCorrupt)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(corrupt), "five reads of one damaged run")
	for i := 0; i < 5; i++ {
		require.ErrorIs(t, errOf(s.Get(ctx, "c")), ErrCorrupt)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(corrupt), "and five of one damaged generation")

	d := keySet{limit: damagedMax}
	for i := 0; i < damagedMax+10; i++ {
		require.True(t, d.add(fmt.Sprint(i)))
	}
	require.Len(t, d.keys, damagedMax)
	require.Len(t, d.order, damagedMax)
	require.True(t, d.add("0"), "the oldest key was forgotten")
	require.False(t, d.add(fmt.Sprint(damagedMax+9)), "the newest is remembered")
}

// A damaged WAL object can be set aside like a generation: the owner then claims the shard,
// replays the objects around it and appends again, the rows only that object held are given
// up, and no seal deletes the object.
func TestQuarantineDamagedWALObjectLetsTheOwnerAppend(t *testing.T) {
	ctx := context.Background()
	root, tgt, key, _ := damagedWALStore(t, "qw")
	db := openTestDB(t, root, "w1")
	s := openGeneric(t, db, "qw")
	require.ErrorIs(t, errOf(s.Append(ctx, []Row{row("c", 3)})), ErrCorrupt)

	res := call(s.Quarantine(ctx, key, "WAL object damaged, no backup")).must(t)
	require.Equal(t, "wal", res.Kind)
	require.Equal(t, db.Shard(), res.Shard)
	require.True(t, call(s.Quarantine(ctx, key, "again")).must(t).AlreadyQuarantined)

	appendRows(t, s, row("c", 3))
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceAll), "b was only in the damaged object")
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	require.Equal(t, map[string]int64{"a": 1, "c": 3}, allRows(t, s, SourceBase))
	require.True(t, keyExists(t, db, key), "a seal's WAL clean-up must not delete a quarantined WAL object")
	require.Equal(t, 1, call(s.Stats(ctx)).must(t).Quarantined)

	// A restarted owner replays around it too.
	s2 := openGeneric(t, openTestDB(t, root, "w1"), "qw")
	appendRows(t, s2, row("d", 4))
	require.Equal(t, map[string]int64{"a": 1, "c": 3, "d": 4}, allRows(t, s2, SourceAll))

	// A sealed WAL object is deleted: there is nothing to set aside.
	require.ErrorIs(t, errOf(s2.Quarantine(ctx, walKey(tgt, db.Shard(), 1), "r")), ErrNotFound)
}
