package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// isCompactOutput reports whether key is a compaction output under some store's data/.
func isCompactOutput(key string) bool { return strings.Contains(key, "/data/"+compactRunNamePrefix) }

// sealRuns gives s n base runs of one row each.
func sealRuns(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
		call(s.MergeAll(context.Background())).must(t)
	}
}

// requireBaseReadable fails unless every run the latest base names exists.
func requireBaseReadable(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	base := call(s.loadBase(ctx)).must(t)
	for _, r := range base.Runs {
		require.True(t, keyExists(t, s.db, r.Path), "the base names run %s, which is gone", r.Path)
	}
}

// Two executions of one compaction (a retried or reset one beside one still running) that
// read the same base and bound: when one's publish fails, its clean-up must not delete what
// the other published between the clean-up's look at the base and its delete.
func TestFindingCompactionCleanupSparesAnotherExecutionsOutput(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db1 := openTestDB(t, url, "w1")
	s1 := createGeneric(t, db1, "twin", false)
	sealRuns(t, s1, 3)
	want := allRows(t, s1, SourceAll)

	db2 := openTestDB(t, url, "w2")
	s2 := openGeneric(t, db2, "twin")
	var other atomic.Bool
	db2.bucket = db2.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") {
			return errors.New("injected: base publish failed")
		}
		if op == objstore.OpDelete && isCompactOutput(key) && other.CompareAndSwap(false, true) {
			res := call(s1.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
			require.True(t, res.Committed, "the other execution publishes between the look and the delete")
		}
		return nil
	}})
	require.Error(t, errOf(s2.CompactBase(ctx, CompactParams{MaxRuns: -1})))
	require.True(t, other.Load(), "the failed execution cleaned up")

	requireBaseReadable(t, s1)
	require.Equal(t, want, allRows(t, openGeneric(t, openTestDB(t, url, "r"), "twin"), SourceAll))
}

// A pass whose output took longer than compactPublishWindow to write does not publish it: the
// collector may already judge an output that old abandoned.
func TestCompactionPastItsPublishWindowDoesNotPublish(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	db, s := newGenericStore(t, url, "slow", func(o *Options) { o.Now = clock })
	sealRuns(t, s, 3)
	before := call(s.loadBase(ctx)).must(t)

	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op == objstore.OpPut && isCompactOutput(key) && skew.Load() == 0 {
			skew.Store(int64(compactPublishWindow + time.Minute)) // the put took past the window
		}
		return err
	}})
	require.ErrorIs(t, errOf(s.CompactBase(ctx, CompactParams{MaxRuns: -1})), ErrStalled)
	require.Equal(t, before.Version, call(s.loadBase(ctx)).must(t).Version, "nothing was published")
	require.Empty(t, listKeys(t, db.bucket, dataPrefix(s.target)+compactRunNamePrefix), "the pass deleted its own output")

	res := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t) // a pass in time publishes
	require.True(t, res.Committed)
}

// An output whose pass died before publishing it, and could not delete it, is deleted by a
// later pass once it is older than compactOrphanAge, and not before; published runs, runs set
// aside and keys walkeeper did not write stay.
func TestAbandonedCompactionOutputsAreCollected(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db, s := newGenericStore(t, url, "orphans")
	sealRuns(t, s, 2)

	dead := openTestDB(t, url, "dead")
	dead.bucket = dead.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") || op == objstore.OpDelete && isCompactOutput(key) {
			return errors.New("injected: the worker died")
		}
		return nil
	}})
	require.Error(t, errOf(openGeneric(t, dead, "orphans").CompactBase(ctx, CompactParams{MaxRuns: -1})))
	orphans := call(db.bucket.List(ctx, dataPrefix(s.target)+compactRunNamePrefix)).must(t)
	require.Len(t, orphans, 1, "the dead pass left its output")
	foreign := dataPrefix(s.target) + compactRunNamePrefix + "copy-of-a-run.parquet"
	require.NoError(t, db.bucket.Put(ctx, foreign, []byte("not ours")))

	res := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, res.Committed)
	require.Zero(t, res.AbandonedOutputs, "a young output may still be published")
	require.True(t, keyExists(t, db, orphans[0].Key))

	later := openTestDB(t, url, "later", func(o *Options) {
		o.Now = func() time.Time { return time.Now().Add(compactOrphanAge + time.Hour) }
	})
	sl := openGeneric(t, later, "orphans")
	res = call(sl.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t) // one run left: a no-op pass collects too
	require.Equal(t, 1, res.AbandonedOutputs)
	require.False(t, keyExists(t, db, orphans[0].Key), "the abandoned output is deleted")
	require.True(t, keyExists(t, db, foreign), "a key walkeeper did not write is not deleted")
	require.Positive(t, foreignCount(later.metrics, foreignCompaction))
	requireBaseReadable(t, sl)
	require.Equal(t, map[string]int64{"k0": 0, "k1": 1}, allRows(t, sl, SourceAll))
}

func TestCompactRunKeysAreRecognisedExactly(t *testing.T) {
	tgt := Target{Kind: KindGeneric, Name: "x"}
	id := compactRunID()
	require.True(t, isCompactRunKey(tgt, dataKey(tgt, id)))
	require.NotEqual(t, id, compactRunID(), "each execution names its own output")
	for _, bad := range []string{"c-", "c-0123456789abcdef0123456", "c-0123456789abcdef012345678", "c-0123456789ABCDEF01234567", "m-0123456789abcdef01234567"} {
		require.False(t, isCompactRunKey(tgt, dataKey(tgt, bad)), bad)
	}
	require.True(t, isCompactRunKey(tgt, dataKey(tgt, "c-0123456789abcdef01234567")), "an earlier build's hashed name")
}
