package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
)

func TestWatermarkCoverage(t *testing.T) {
	for _, tc := range []struct {
		wm, from, through uint64
		want              manifest.Coverage
	}{
		{0, 1, 3, manifest.RangeOpen},
		{2, 3, 5, manifest.RangeOpen},
		{3, 3, 5, manifest.RangeOverlapped},
		{4, 3, 5, manifest.RangeOverlapped},
		{5, 3, 5, manifest.RangeCommitted},
		{9, 3, 5, manifest.RangeCommitted},
		{3, 3, 3, manifest.RangeCommitted},
	} {
		require.Equal(t, tc.want, manifest.WatermarkCoverage(tc.wm, tc.from, tc.through), "wm %d range %d..%d", tc.wm, tc.from, tc.through)
	}
}

func TestBaseManifestDrafts(t *testing.T) {
	tgt := Target{Kind: KindGeneric, Name: "m"}
	base := &manifest.Base{Version: 7, Runs: []manifest.Run{{ID: "r1", Path: dataKey(tgt, "r1")}, {ID: "r2", Path: dataKey(tgt, "r2")}},
		Watermarks: map[string]uint64{"s1": 4}}

	p := &PreparedMerge{Shard: "s2", Generations: []uint64{2, 3}, Through: 3,
		Staged: []StagedFile{{Path: dataKey(tgt, "m-x-s2-2-3"), Rows: 5, Checksum: "c"}}}
	merged := withMerges(base, []*PreparedMerge{p})
	require.Equal(t, uint64(8), merged.Version)
	require.Equal(t, "merge", merged.Reason)
	require.Equal(t, map[string]uint64{"s1": 4, "s2": 3}, merged.Watermarks)
	require.Len(t, merged.Runs, 3)
	require.Equal(t, manifest.Run{ID: "m-x-s2-2-3", Path: dataKey(tgt, "m-x-s2-2-3"), Rows: 5, Checksum: "c", Source: "merge:s2:2-3"}, merged.Runs[2])
	require.True(t, merged.References(dataKey(tgt, "m-x-s2-2-3")))
	require.Equal(t, map[string]uint64{"s1": 4}, base.Watermarks, "a draft never edits the version it came from")
	require.Len(t, base.Runs, 2)

	out := &manifest.Run{ID: "c1", Path: dataKey(tgt, "c1")}
	compacted, ok := merged.WithCompaction(base.Runs, out)
	require.True(t, ok)
	require.Equal(t, uint64(9), compacted.Version)
	require.Equal(t, "compact", compacted.Reason)
	require.Equal(t, []string{"m-x-s2-2-3", "c1"}, []string{compacted.Runs[0].ID, compacted.Runs[1].ID})

	_, ok = compacted.WithCompaction(base.Runs, out)
	require.False(t, ok, "inputs no longer in the manifest: nothing to publish")
}

func TestShardManifestCoveredBy(t *testing.T) {
	m := &manifest.Shard{Flushed: []manifest.Gen{{Gen: 2}, {Gen: 3}, {Gen: 5}}}
	require.Nil(t, m.CoveredBy(1))
	require.Equal(t, []uint64{2, 3}, m.CoveredBy(4))
	require.Equal(t, []manifest.Gen{{Gen: 5}}, m.PendingAbove(4))
}

// A handle reuses its decode of a shard manifest version while the storage read still finds
// that version the latest, sees a version another handle published at once, never decodes
// what it published itself, and never changes a decode it handed out.
func TestLoadShardReusesDecodeOfSameVersion(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db, w := newGenericStore(t, url, "cache")
	other := openGeneric(t, openTestDB(t, url, "w2"), "cache")
	shard := db.shard

	seal(t, w, row("a", 1))
	own := call(w.loadShard(ctx, shard)).must(t)
	require.Same(t, w.residentWriter().manifest, own, "the publisher keeps what it published as its decode")

	m1 := call(other.loadShard(ctx, shard)).must(t)
	require.Same(t, m1, call(other.loadShard(ctx, shard)).must(t), "same version, same decode")
	require.Len(t, m1.Flushed, 1)

	seal(t, w, row("b", 2))
	m3 := call(other.loadShard(ctx, shard)).must(t)
	require.Equal(t, m1.Version+1, m3.Version, "the storage read finds the newer version")
	require.Len(t, m3.Flushed, 2)
	require.Len(t, m1.Flushed, 1, "a decode handed out is never changed")

	// A drain by the other handle: the writer's next read decodes the new version once.
	require.NoError(t, errOf(other.drain(ctx, shard, []uint64{m3.Flushed[0].Gen})))
	m4 := call(w.loadShard(ctx, shard)).must(t)
	require.Len(t, m4.Flushed, 1)
	require.Same(t, m4, call(w.loadShard(ctx, shard)).must(t))
}

// The base manifest goes through the same cache: a committer keeps its draft as the decode
// of the version it published, another handle decodes that version once and then reuses it,
// and what it handed out before is never changed.
func TestLoadBaseReusesDecodeOfSameVersion(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	_, w := newGenericStore(t, url, "basecache")
	other := openGeneric(t, openTestDB(t, url, "w2"), "basecache")

	before := call(other.loadBase(ctx)).must(t)
	require.Zero(t, before.Version)

	sealGenerations(t, w, 2)
	res := call(commitOne(ctx, w, call(w.Prepare(ctx, PrepareParams{})).must(t))).must(t)

	own := call(w.loadBase(ctx)).must(t)
	require.Equal(t, res.BaseVersion, own.Version)
	require.Same(t, own, call(w.loadBase(ctx)).must(t), "the committer reuses its draft")

	b1 := call(other.loadBase(ctx)).must(t)
	require.Equal(t, res.BaseVersion, b1.Version, "the storage read finds the new version")
	require.Len(t, b1.Runs, len(own.Runs))
	require.Same(t, b1, call(other.loadBase(ctx)).must(t))
	require.Zero(t, before.Version)
	require.Empty(t, before.Runs, "a decode handed out is never changed")
}
