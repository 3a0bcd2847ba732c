package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A merge that commits and drains but does not delete its demand records (a crash, or failed
// deletes, which are best effort) leaves records of merged generations: the sweep starts a
// MergeWal for them, which lists no pending shard and so runs no Repair. That MergeWal's
// listing deletes them, so the sweep starts one needless MergeWal and not one every round
// until the hourly reconcile.
func TestMergeWalListingWithNothingPendingDeletesStaleDemandRecords(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	db := openDB(t, url, "w1")
	s := seal(t, db, "generic:stale", []string{"a"}, []string{"b"}, []string{"c"})
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	objs, err := b.List(ctx, "_demand/generic/stale/")
	require.NoError(t, err)
	require.Len(t, objs, 3)
	kept := map[string][]byte{}
	for _, o := range objs {
		body, err := b.Get(ctx, o.Key)
		require.NoError(t, err)
		kept[o.Key] = body
	}
	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	for k, body := range kept { // the merge's record deletes did not happen
		require.NoError(t, b.Put(ctx, k, body))
	}

	env := newActivityEnv(t, &Activities{DB: db})
	scan := func() contract.ScanDemandResult { return scanGenericDemand(t, env) }
	require.Len(t, scan().Targets, 1, "the stale records read as debt")

	listed := mustRun[contract.ListPendingShardsResult](t, env, contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:stale"})
	require.Empty(t, listed.Shards)

	res := scan()
	require.Empty(t, res.Targets, "the next sweep round would start another needless MergeWal")
	require.Zero(t, res.Records)
	left, err := b.List(ctx, "_demand/generic/")
	require.NoError(t, err)
	for _, o := range left {
		require.False(t, strings.HasPrefix(o.Key, "_demand/generic/stale/"), o.Key)
	}
}

// Demand records of a store that does not exist (its store.json gone, a restore without it)
// are candidates to the sweep for ever: the MergeWal started for them fails store_not_found in
// its listing, and the reconcile pages through the registry, which does not name the store.
// The listing that finds no store deletes its records once they are older than any seal in
// flight (DemandOrphanAge).
func TestMergeWalListingOfAMissingStoreDeletesItsDemandRecords(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:ghost", []string{"a"}, []string{"b"})
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, "generic/ghost/store.json"))
	// Fresh DBs: the writer's handle would still serve the store from memory. Records younger
	// than a seal in flight stay.
	young := openDB(t, url, "w3")
	_, err = newActivityEnv(t, &Activities{DB: young}).ExecuteActivity(contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:ghost"})
	require.Error(t, err)
	objs, err := b.List(ctx, "_demand/generic/ghost/")
	require.NoError(t, err)
	require.Len(t, objs, 2, "records younger than DemandOrphanAge stay")
	db2 := openDB(t, url, "w2", func(o *store.Options) {
		o.Now = func() time.Time { return time.Now().Add(store.DemandOrphanAge + time.Minute) }
	})
	env := newActivityEnv(t, &Activities{DB: db2})
	scan := func() contract.ScanDemandResult { return scanGenericDemand(t, env) }
	require.Len(t, scan().Targets, 1)

	_, err = env.ExecuteActivity(contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:ghost"})
	require.Error(t, err)
	require.Contains(t, err.Error(), contract.ErrTypeStoreNotFound)
	require.Empty(t, scan().Targets, "the next sweep round would start another MergeWal that fails")
}

// A store whose registry entry is gone (removed by hand, a restore of the store's prefix and
// of _demand/ without it) does not exist, though its store.json does: the MergeWal started for
// its demand records failed store_not_found in its listing, which kept them since the store.json
// was there, and the reconcile, which pages through the registry, never reached them, so the
// sweep started a failing MergeWal for the store every round for ever.
func TestFindingDemandRecordsOfAnUnregisteredStoreAreDeleted(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:unlisted", []string{"a"}, []string{"b"})
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, "_registry/generic/unlisted.json"))

	young := openDB(t, url, "w3")
	_, err = newActivityEnv(t, &Activities{DB: young}).ExecuteActivity(contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:unlisted"})
	require.ErrorContains(t, err, contract.ErrTypeStoreNotFound)
	objs, err := b.List(ctx, "_demand/generic/unlisted/")
	require.NoError(t, err)
	require.Len(t, objs, 2, "records younger than DemandOrphanAge stay")

	db2 := openDB(t, url, "w2", func(o *store.Options) {
		o.Now = func() time.Time { return time.Now().Add(store.DemandOrphanAge + time.Minute) }
	})
	env := newActivityEnv(t, &Activities{DB: db2})
	scan := func() contract.ScanDemandResult { return scanGenericDemand(t, env) }
	require.Len(t, scan().Targets, 1)
	_, err = env.ExecuteActivity(contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:unlisted"})
	require.ErrorContains(t, err, contract.ErrTypeStoreNotFound)
	require.Empty(t, scan().Targets, "the next sweep round would start another MergeWal that fails")
	ok, err := b.Exists(ctx, "generic/unlisted/store.json")
	require.NoError(t, err)
	require.True(t, ok, "only the demand records are deleted")
}

// scanGenericDemand runs ScanDemand over the generic stores, every store with a pending
// generation a candidate.
func scanGenericDemand(t *testing.T, env *testsuite.TestActivityEnvironment) contract.ScanDemandResult {
	t.Helper()
	return mustRun[contract.ScanDemandResult](t, env, contract.ScanDemandActivity, contract.ScanDemandParams{
		Kind: "generic", MaxCandidates: 10, MergeMinGenerations: 1, AsOf: time.Now(),
	})
}
