package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
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
	require.Equal(t, 1500, chunkEnd(long, 0, 4096, mergeChunkBytes, nil))
	require.Equal(t, 1600, chunkEnd(long, 1500, 4096, mergeChunkBytes, nil))
	require.Equal(t, 1000, chunkEnd(long, 0, 1000, mergeChunkBytes, nil))
	require.Equal(t, 2000, chunkEnd(interleaved, 0, 4096, mergeChunkBytes, nil)) // short runs: the whole rest
}

// A merge's concurrent reads get their buffers in plan order: when the reservation holds only
// the first two generations and cannot grow (a prepare is queued for the budget), a slow read
// of the first generation still gets its buffer and the merge keeps the prefix of two,
// instead of the later reads taking the room and failing the merge with errFirstOverBudget.
func TestMergeReadsKeepThePrefixWhateverTheReadOrder(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(64 << 20)
	db, s := newGenericStore(t, "file://"+t.TempDir(), "order", func(o *Options) { o.Budget = budget })
	pad := strings.Repeat("p", 1000)
	for g := 0; g < 3; g++ {
		var rs []Row
		for i := 0; i < 2000; i++ {
			rs = append(rs, keyRow(fmt.Sprintf("k%d-%05d", g, i), int64(i), pad))
		}
		seal(t, s, rs...)
	}
	gens := call(s.loadShard(ctx, db.shard)).must(t).PendingAbove(0)
	require.Len(t, gens, 3)
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && key == gens[0].Path {
			time.Sleep(300 * time.Millisecond) // the later reads get there first
		}
		return nil
	}})

	var want int64
	for _, g := range gens[:2] {
		want += int64(classSize(classOf(int(g.Bytes) + 1)))
	}
	res := mustReserve(t, budget, want+4096)
	queued := make(chan struct{})
	go func() { // queued for the rest of the budget: no reservation may grow meanwhile
		defer close(queued)
		r, _, err := budget.Reserve(ctx, budget.Limit())
		if err == nil {
			r.Release()
		}
	}()
	waitQueued(t, budget, 1, "the request for the rest to queue")
	acct := newMemAccount(res, budget)
	files, frees, err := s.readGensForMerge(ctx, acct, db.shard, gens, nil)
	require.NoError(t, err)
	require.Len(t, files, 2, "the prefix the reservation holds")
	for i, f := range files {
		require.Equal(t, gens[i].Path, f.path)
		f.rec.Release()
		frees[i]()
	}
	require.Zero(t, acct.Allocated(), "every buffer and prepaid byte was credited")
	res.Release()
	<-queued
}
