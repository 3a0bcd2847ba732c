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

	"github.com/walkeeper/walkeeper/internal/testkit/requestcount"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// demandOf lists the parsed generation records of target t (compaction marker excluded).
func demandOf(t *testing.T, db *DB, tgt Target) []DemandRecord {
	t.Helper()
	var out []DemandRecord
	require.NoError(t, db.WalkDemand(context.Background(), tgt.Kind, func(r DemandRecord) error {
		if r.Target == tgt && !r.Compact {
			out = append(out, r)
		}
		return nil
	}))
	return out
}

func TestDemandKeyRoundTrip(t *testing.T) {
	tgt := Target{Kind: KindGeneric, Name: "orders"}
	at := time.Unix(1_700_000_123, 0).UTC()
	key := demandKey(tgt, "s1", 42, at, 4096)
	require.NoError(t, objstore.CheckKey(key))
	r, ok := ParseDemandKey(key)
	require.True(t, ok)
	require.Equal(t, DemandRecord{Key: key, Target: tgt, Shard: "s1", Gen: 42, SealedAt: at, Bytes: 4096}, r)

	m, ok := ParseDemandKey(demandCompactMarker(tgt))
	require.True(t, ok)
	require.True(t, m.Compact)
	require.Equal(t, tgt, m.Target)

	for _, bad := range []string{"_demand/generic", "_demand/nokind/x/s/00000000000000000001-1-1",
		"_demand/generic/x/s/1-1-1", "_demand/generic/x/s/00000000000000000001-x-1", "_demand/generic/x/other", "foo"} {
		_, ok := ParseDemandKey(bad)
		require.False(t, ok, bad)
	}
}

// A seal writes its demand record before the manifest that publishes the generation: with
// every manifest put failing, the record is there and the generation is not listed.
func TestSealWritesDemandBeforeManifest(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			var manifestPuts atomic.Int64
			db, s := newGenericStore(t, url, "orders")
			appendRows(t, s, row("a", 1))
			db.bucket = db.bucket.WithFaults(failOn(errors.New("injected: crash before the manifest publish"), func(op, key string) bool {
				publish := op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/")
				if publish {
					manifestPuts.Add(1)
				}
				return publish
			}))
			require.Error(t, errOf(s.Flush(context.Background())))
			require.Positive(t, manifestPuts.Load())
			recs := demandOf(t, db, s.target)
			require.Len(t, recs, 1, "the record is written before the manifest")
			require.Equal(t, db.shard, recs[0].Shard)
			require.Empty(t, listedGens(t, s, db.shard))

			// The writer recovers and seals again: still exactly one live generation, its
			// record findable.
			db.bucket = db.bucket.WithFaults(nil)
			res := flush(t, s)
			require.True(t, res.Sealed)
			found := false
			for _, r := range demandOf(t, db, s.target) {
				found = found || r.Gen == res.Generation
			}
			require.True(t, found, "the published generation has a record")
		})
	}
}

// The merge commit deletes the records its watermark covers; a seal landing after the
// prepare keeps its own.
func TestMergeCommitDeletesCoveredDemand(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, s := newGenericStore(t, url, "orders")
			for i := range 3 {
				seal(t, s, row(fmt.Sprint("k", i), int64(i)))
			}
			require.Len(t, demandOf(t, db, s.target), 3)
			p := call(s.Prepare(ctx, PrepareParams{Shard: db.shard})).must(t)
			appendRows(t, s, row("late", 9))
			late := flush(t, s)
			call(commitOne(ctx, s, p)).must(t)
			recs := demandOf(t, db, s.target)
			require.Len(t, recs, 1)
			require.Equal(t, late.Generation, recs[0].Gen)
		})
	}
}

// A crash between the commit and its demand clean-up leaves stale records; the next
// prepare (what a sweep-started MergeWal runs) deletes them, and so does reconcile.
func TestStaleAndOrphanDemandAreCleaned(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	db, s := newGenericStore(t, backends(t)["mem"], "orders", func(o *Options) { o.Now = clock })
	appendRows(t, s, row("a", 1))
	g := flush(t, s)

	// Stale: the commit's clean-up "crashed" (every demand delete fails).
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpDelete && strings.HasPrefix(key, demandDir+"/") {
			return errors.New("injected: crash before demand clean-up")
		}
		return nil
	}})
	call(s.MergeOnce(ctx, db.shard)).must(t)
	require.Len(t, demandOf(t, db, s.target), 1, "stale record survives the failed clean-up")
	db.bucket = db.bucket.WithFaults(nil)

	// Orphans: a seal that crashed between its record and its manifest (gen at
	// next_generation), one recent and one old; and one for a generation never published
	// below next_generation.
	sh := db.shard
	fresh := demandKey(s.target, sh, g.Generation+1, now, 10)
	old := demandKey(s.target, sh, g.Generation+2, now.Add(-time.Hour), 10)
	require.NoError(t, db.bucket.Put(ctx, fresh, []byte("{}")))
	require.NoError(t, db.bucket.Put(ctx, old, []byte("{}")))

	// A repair that finds nothing to drain still cleans the shard's records.
	require.NoError(t, errOf(s.Repair(ctx, RepairParams{Shard: sh})))
	recs := demandOf(t, db, s.target)
	require.Len(t, recs, 2, "covered record deleted; in-flight-looking orphans stay until old: %+v", recs)

	// The old orphan is old by its key's seal time but was just written: clean-up waits
	// for both to pass DemandOrphanAge.
	now = now.Add(DemandOrphanAge + time.Minute)
	res := call(s.ReconcileDemand(ctx)).must(t)
	require.Equal(t, 2, res.Orphans)
	require.Empty(t, demandOf(t, db, s.target))
}

// A demand record whose seal time lies in the future (written by a process whose clock ran
// ahead, or put there by hand) for a generation the manifest never listed was never old
// enough to delete, so it counted as pending for good: with merge_min_generations 1 the sweep
// started a MergeWal for it every round, each finding nothing to merge.
func TestFindingFutureSealedDemandRecordIsCleaned(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	db, s := newGenericStore(t, backends(t)["mem"], "orders", func(o *Options) { o.Now = clock })
	appendRows(t, s, row("a", 1))
	g := flush(t, s)
	call(s.MergeOnce(ctx, db.shard)).must(t)
	require.Empty(t, demandOf(t, db, s.target))

	sh := db.shard
	ahead := demandKey(s.target, sh, g.Generation+1, now.Add(100*365*24*time.Hour), 10)
	require.NoError(t, db.bucket.Put(ctx, ahead, []byte("{}")))
	call(s.CleanIdleDemand(ctx)).must(t)
	require.Len(t, demandOf(t, db, s.target), 1, "a record just written may be a seal in flight")

	now = now.Add(DemandOrphanAge + time.Minute)
	res := call(s.CleanIdleDemand(ctx)).must(t)
	require.Equal(t, 1, res.Orphans, "the listing of a merge that finds nothing deletes it")
	require.Empty(t, demandOf(t, db, s.target))

	require.NoError(t, db.bucket.Put(ctx, ahead, []byte("{}")))
	now = now.Add(DemandOrphanAge + time.Minute)
	res = call(s.ReconcileDemand(ctx)).must(t)
	require.Equal(t, 1, res.Orphans, "so does the reconcile")
	require.Empty(t, demandOf(t, db, s.target))
}

// Reconcile writes the record of a pending generation that has none (sealed before the
// index existed, or its record lost) and sets the compaction marker from the run count.
func TestReconcileRepairsMissingDemandAndCompactMarker(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, backends(t)["mem"], "orders", func(o *Options) { o.CompactDemandRuns = 2 })
	for i := range 2 {
		seal(t, s, row(fmt.Sprint("k", i), 1))
		call(s.MergeOnce(ctx, db.shard)).must(t)
	}
	require.True(t, keyExists(t, db, demandCompactMarker(s.target)), "the commit that made 2 runs wrote the marker")

	appendRows(t, s, row("p", 1))
	g := flush(t, s)
	for _, r := range demandOf(t, db, s.target) {
		require.NoError(t, db.bucket.Delete(ctx, r.Key))
	}
	require.NoError(t, db.bucket.Delete(ctx, demandCompactMarker(s.target)))

	res := call(s.ReconcileDemand(ctx)).must(t)
	require.Equal(t, 1, res.Missing)
	recs := demandOf(t, db, s.target)
	require.Len(t, recs, 1)
	require.Equal(t, g.Generation, recs[0].Gen)
	require.True(t, keyExists(t, db, demandCompactMarker(s.target)), "reconcile restored the marker")

	call(s.CompactBase(ctx, CompactParams{})).must(t)
	require.False(t, keyExists(t, db, demandCompactMarker(s.target)), "compaction below the threshold cleared the marker")
}

// A compaction marker written while workers marked stores (--compact-demand-runs N) stayed for
// good once they stopped (0 = never mark): neither a compaction nor the reconcile cleared it,
// so every sweep round started a CompactBase for the store, each rewriting whatever runs the
// last round's merges added, and succeeding, for ever.
func TestFindingCompactionMarkerIsClearedOnceMarkingIsOff(t *testing.T) {
	ctx := context.Background()
	url := backends(t)["mem"]
	db, s := newGenericStore(t, url, "orders", func(o *Options) { o.CompactDemandRuns = 2 })
	for i := range 2 {
		seal(t, s, row(fmt.Sprint("k", i), 1))
		call(s.MergeOnce(ctx, db.shard)).must(t)
	}
	require.True(t, keyExists(t, db, demandCompactMarker(s.target)))

	off := openTestDB(t, url, "w2", func(o *Options) { o.CompactDemandRuns = 0 })
	call(openGeneric(t, off, "orders").CompactBase(ctx, CompactParams{})).must(t)
	require.False(t, keyExists(t, off, demandCompactMarker(s.target)), "the compaction clears the marker nobody writes any more")

	require.NoError(t, db.bucket.Put(ctx, demandCompactMarker(s.target), []byte("{}")))
	call(openGeneric(t, off, "orders").ReconcileDemand(ctx)).must(t)
	require.False(t, keyExists(t, off, demandCompactMarker(s.target)), "so does the reconcile")
}

// ListStores pages the registry in name order with a cursor, across many pages, on both
// the native (file://) and the start-after (mem://) paths; Walk streams.
func TestListStoresPagesAcrossManyPages(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := openTestDB(t, url, "w1")
			const n = 23
			want := make([]string, 0, n)
			for i := range n {
				nm := fmt.Sprintf("s%03d", i)
				if i%5 == 0 {
					nm += "-x" // "-" sorts before ".json": key order must still be name order here
				}
				createGeneric(t, db, nm, false)
				want = append(want, nm)
			}
			got := pageStores(t, db, KindGeneric, 5) // every page but the last full: five pages
			all, err := db.ListTargets(ctx, []Kind{KindGeneric}, Target{}, MaxListPage)
			require.NoError(t, err)
			require.Equal(t, want, got)
			for i, s := range all.Stores {
				require.Equal(t, s.Name, got[i], "pages follow ListTargets' order")
			}

			require.ErrorIs(t, errOf(db.ListStores(ctx, KindGeneric, "../x", 5)), ErrInvalidInput)
			require.ErrorIs(t, errOf(db.ListStores(ctx, Kind("nope"), "", 5)), ErrInvalidInput)

			seen := 0
			require.NoError(t, db.Bucket().Walk(ctx, registryDir+"/", func(objstore.ObjectInfo) error { seen++; return nil }))
			require.Equal(t, n, seen)
			stop := errors.New("stop")
			require.ErrorIs(t, db.Bucket().Walk(ctx, registryDir+"/", func(objstore.ObjectInfo) error { return stop }), stop)
		})
	}
}

func TestRequestCounterCounts(t *testing.T) {
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, backends(t)["mem"])
	require.NoError(t, err)
	rc := &requestcount.Counter{}
	cb := b.WithFaults(rc)
	require.NoError(t, cb.Put(ctx, "a/b", []byte("x")))
	require.NoError(t, errOf(cb.Get(ctx, "a/b")))
	_, _, _, err = cb.ListPageBytes(ctx, "a/", "", 10, 0, nil, nil)
	require.NoError(t, err)
	c := rc.Counts()
	require.Equal(t, requestcount.Counts{Get: 1, Put: 1, List: 1}, c)
	require.EqualValues(t, 3, c.Total())
}

// A shard manifest reconcile cannot read is reported once: the compaction-marker step,
// which had nothing to do, must not report that error again.
func TestReconcileReportsAnUnreadableShardOnce(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, backends(t)["mem"], "orders")
	seal(t, s, row("a", 1))
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if (op == objstore.OpGet || op == objstore.OpList) && strings.HasPrefix(key, shardManifestPrefix(s.target, db.shard)) {
			return errors.New("injected: shard manifest unreadable")
		}
		return nil
	}})
	_, err := s.ReconcileDemand(ctx)
	require.Error(t, err)
	require.Equal(t, 1, strings.Count(err.Error(), "injected: shard manifest unreadable"), err.Error())
}
