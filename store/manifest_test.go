package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWatermarkCoverage(t *testing.T) {
	for _, tc := range []struct {
		wm, from, through uint64
		want              rangeCoverage
	}{
		{0, 1, 3, rangeOpen},
		{2, 3, 5, rangeOpen},
		{3, 3, 5, rangeOverlapped},
		{4, 3, 5, rangeOverlapped},
		{5, 3, 5, rangeCommitted},
		{9, 3, 5, rangeCommitted},
		{3, 3, 3, rangeCommitted},
	} {
		require.Equal(t, tc.want, watermarkCoverage(tc.wm, tc.from, tc.through), "wm %d range %d..%d", tc.wm, tc.from, tc.through)
	}
}

func TestBaseManifestDrafts(t *testing.T) {
	tgt := Target{Kind: KindGeneric, Name: "m"}
	base := &baseManifest{Version: 7, Runs: []runMeta{{ID: "r1", Path: dataKey(tgt, "r1")}, {ID: "r2", Path: dataKey(tgt, "r2")}},
		Watermarks: map[string]uint64{"s1": 4}}

	p := &PreparedMerge{Shard: "s2", Generations: []uint64{2, 3}, Through: 3,
		Staged: []StagedFile{{Path: dataKey(tgt, "m-x-s2-2-3"), Rows: 5, Checksum: "c"}}}
	merged := base.withMerge(p)
	require.Equal(t, uint64(8), merged.Version)
	require.Equal(t, "merge", merged.Reason)
	require.Equal(t, map[string]uint64{"s1": 4, "s2": 3}, merged.Watermarks)
	require.Len(t, merged.Runs, 3)
	require.Equal(t, runMeta{ID: "m-x-s2-2-3", Path: dataKey(tgt, "m-x-s2-2-3"), Rows: 5, Checksum: "c", Source: "merge:s2:2-3"}, merged.Runs[2])
	require.True(t, merged.references(dataKey(tgt, "m-x-s2-2-3")))
	require.Equal(t, map[string]uint64{"s1": 4}, base.Watermarks, "a draft never edits the version it came from")
	require.Len(t, base.Runs, 2)

	out := &runMeta{ID: "c1", Path: dataKey(tgt, "c1")}
	compacted, ok := merged.withCompaction(base.Runs, out)
	require.True(t, ok)
	require.Equal(t, uint64(9), compacted.Version)
	require.Equal(t, "compact", compacted.Reason)
	require.Equal(t, []string{"m-x-s2-2-3", "c1"}, []string{compacted.Runs[0].ID, compacted.Runs[1].ID})

	_, ok = compacted.withCompaction(base.Runs, out)
	require.False(t, ok, "inputs no longer in the manifest: nothing to publish")
}

func TestShardManifestCoveredBy(t *testing.T) {
	m := &shardManifest{Flushed: []genMeta{{Gen: 2}, {Gen: 3}, {Gen: 5}}}
	require.Nil(t, m.coveredBy(1))
	require.Equal(t, []uint64{2, 3}, m.coveredBy(4))
	require.Equal(t, []genMeta{{Gen: 5}}, m.pendingAbove(4))
}
