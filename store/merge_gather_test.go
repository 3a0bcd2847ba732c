package store

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// gatherRows builds the same record as the row-by-row copy whatever the shape of the picks:
// one run (a zero-copy slice), a few long runs (bulk copies by run) and interleaved rows
// (row by row), nulls and tombstones included, and its buffers are all released.
func TestGatherRowsMatchesRowByRowCopy(t *testing.T) {
	c := iterCodec(t)
	mk := func(shard string, from, n, step int) *sortedFile {
		var rows []iterRow
		for i := 0; i < n; i++ {
			k := from + i*step
			rows = append(rows, iterRow{key: fmt.Sprintf("k%06d", k), n: int64(k), seq: int64(k), del: k%7 == 0})
		}
		return iterFile(t, c, shard, rows...)
	}
	a, b := mk("a", 0, 3000, 2), mk("b", 1, 3000, 2) // interleaved keys
	d := mk("d", 100000, 3000, 1)                    // after both
	run := func(f *sortedFile, lo, hi int) []pick {
		var out []pick
		for i := lo; i < hi; i++ {
			out = append(out, pick{f, i})
		}
		return out
	}
	interleaved := make([]pick, 0, 2000)
	for i := 0; i < 1000; i++ {
		interleaved = append(interleaved, pick{a, i}, pick{b, i})
	}
	cases := map[string][]pick{
		"one run":     run(d, 10, 2500),
		"long runs":   append(append(run(a, 0, 500), run(b, 600, 1400)...), run(d, 0, 3000)...),
		"interleaved": interleaved,
		"one row":     run(b, 7, 8),
		"empty":       nil,
	}
	for name, picks := range cases {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			want := copyRows(mem, c.ArrowSchema(), picks)
			defer want.Release()
			got := gatherRows(mem, c.ArrowSchema(), picks)
			defer got.Release()
			require.True(t, array.RecordEqual(want, got), "gathered record differs from the row-by-row copy")
			require.NoError(t, c.CheckRecord(got))
		})
	}
	// chunkEnd cuts a chunk at the end of a long run that starts it, and nowhere else.
	long := append(run(d, 0, 1500), run(a, 0, 100)...)
	require.Equal(t, 1500, chunkEnd(long, 0, 4096))
	require.Equal(t, 1600, chunkEnd(long, 1500, 4096))
	require.Equal(t, 1000, chunkEnd(long, 0, 1000))
	require.Equal(t, 2000, chunkEnd(interleaved, 0, 4096)) // short runs: the whole rest
}
