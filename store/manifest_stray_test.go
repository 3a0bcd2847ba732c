package store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChainTopIsTheEndOfTheChainAProbeReaches(t *testing.T) {
	for _, tc := range []struct {
		listed []uint64
		want   uint64
	}{
		{[]uint64{1}, 1},
		{[]uint64{7}, 7},
		{[]uint64{1, 2, 3}, 3},
		{[]uint64{1, 900}, 1},         // a stray above a one-version chain
		{[]uint64{4, 5, 6, 900}, 6},   // a stray above the gap
		{[]uint64{2, 40, 41, 42}, 42}, // a stray below, as an old copy would be
	} {
		require.Equal(t, tc.want, chainTop(tc.listed), "%v", tc.listed)
	}
}

// TestFindingStrayManifestVersionAboveTheChainIsForeign: a copy of a base manifest put under
// a far higher version number was the latest for a handle that listed the chain, while a
// handle that already knew a version probed only the next number, so the two read and
// published different bases: merges one of them published (and drained) were invisible to
// the other. Every handle now agrees, and the stray is counted as foreign.
func TestFindingStrayManifestVersionAboveTheChainIsForeign(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	_, w := newGenericStore(t, url, "stray")
	sealGenerations(t, w, 2)
	call(commitOne(ctx, w, call(w.Prepare(ctx, PrepareParams{})).must(t))).must(t)
	cur := call(w.loadBase(ctx)).must(t)
	raw, err := w.base.get(ctx, cur.Version)
	require.NoError(t, err)
	stray := strings.Replace(string(raw), `"version":1,`, `"version":900,`, 1)
	require.NotEqual(t, string(raw), stray, "the stray copy names version 900")
	require.NoError(t, w.db.bucket.Put(ctx, w.base.prefix+versionName(900), []byte(stray)))

	freshDB, m, _ := foreignDB(t, url, "w3")
	fresh := openGeneric(t, freshDB, "stray")
	require.Equal(t, cur.Version, call(fresh.loadBase(ctx)).must(t).Version,
		"a handle opened after the stray reads the chain's latest base")
	require.Equal(t, 1.0, foreignCount(m, foreignManifests), "the stray is counted as foreign")

	// The handle that knew the chain before publishes the next base; the other reads it.
	sealGenerations(t, w, 2)
	call(commitOne(ctx, w, call(w.Prepare(ctx, PrepareParams{})).must(t))).must(t)
	a := call(w.loadBase(ctx)).must(t)
	b := call(fresh.loadBase(ctx)).must(t)
	require.Equal(t, a.Version, b.Version, "every handle agrees on the latest base")
	require.Equal(t, uint64(2), b.Version)
}
