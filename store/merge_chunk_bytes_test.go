package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"
)

// Output chunks are sized from the input's average row, so a stretch of large rows among many
// small ones made one chunk many times its size (here 13.2 MB where a merge's is 8 MiB),
// beyond the footprint the merge reserved, and past 2 GiB of one column the row-by-row copy's int32
// offsets would wrap. A chunk now also ends at its byte size, in a merge's staged run and in a
// compaction's output, and the rows read back the same.
func TestFindingLargeRowsAmongSmallOnesKeepChunksToTheirBytes(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, "file://"+t.TempDir()+"?nosync=1", "skew", func(o *Options) { o.MergeMaxGenerations = 1 })
	large := strings.Repeat("L", 128<<10)
	for g := range 2 {
		var rs []Row
		for i := range 3000 {
			rs = append(rs, keyRow(fmt.Sprintf("k%05d", i), int64(g), "s"))
		}
		// After every small key: one stretch of large rows, in the first run only. The second
		// run gives the compaction two inputs, and with it the first run's stretch in one chunk
		// sized from their average row.
		for i := range 100 * (1 - g) {
			rs = append(rs, keyRow(fmt.Sprintf("m%05d", i), int64(g), large))
		}
		seal(t, s, rs...)
		call(s.MergeAll(ctx)).must(t)
	}
	want := bigList(t, s)

	// largestRowGroup is the most value bytes one row group of a run holds, uncompressed.
	largestRowGroup := func() int64 {
		base := call(s.loadBase(ctx)).must(t)
		var most int64
		for _, r := range base.Runs {
			pf := call(file.NewParquetReader(bytes.NewReader(getObject(t, db.bucket, r.Path)))).must(t)
			for i := range pf.NumRowGroups() {
				most = max(most, pf.MetaData().RowGroup(i).TotalByteSize())
			}
			require.NoError(t, pf.Close())
		}
		return most
	}
	slack := 2*int64(len(large)) + 64<<10 // the row that reaches the bound, and encoding
	require.LessOrEqual(t, largestRowGroup(), int64(mergeChunkBytes)+slack, "a merge's chunk")

	require.True(t, call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t).Committed)
	require.LessOrEqual(t, largestRowGroup(), int64(compactChunkBytes)+slack, "a compaction's chunk")
	require.Equal(t, want, bigList(t, s))
}
