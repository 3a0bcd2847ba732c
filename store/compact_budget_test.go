package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/manifest"
)

func TestCompactionMaxBytesFitsTheBudget(t *testing.T) {
	require.Equal(t, int64(0), compactionMaxBytes(0, 0), "unlimited budget, no cap")
	require.Equal(t, int64(7), compactionMaxBytes(7, 0))
	require.Equal(t, int64(1<<20), compactionMaxBytes(0, 4<<20))
	require.Equal(t, int64(1<<20), compactionMaxBytes(8<<20, 4<<20))
	require.Equal(t, int64(100), compactionMaxBytes(100, 4<<20))
	require.Equal(t, int64(1), compactionMaxBytes(0, 2), "a tiny budget still allows a pass")
	require.Equal(t, int64(64<<20-compactOutputWindow)/2, compactionMaxBytes(0, 64<<20), "what the output window leaves, halved")
	require.Equal(t, int64(compactOutputWindow+30+(40+64<<10)+(80+64<<10)), compactionFootprint([]manifest.Run{{Bytes: 10}, {Bytes: 20}}))
	require.Equal(t, int64(compactOutputWindow+(1<<30)+compactRunWindow), compactionFootprint([]manifest.Run{{Bytes: 1 << 30}}))
}

// CompactBase takes its footprint from the process budget before reading, waits for it
// holding nothing, and gives it back.
func TestCompactBaseReservesFromTheBudget(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(64 << 20)
	_, s := newGenericStore(t, "file://"+t.TempDir(), "compact", func(o *Options) { o.MergeMaxGenerations = 1; o.Budget = budget })
	for i := 0; i < 4; i++ {
		seal(t, s, row("same", int64(i)), row(fmt.Sprintf("k%d", i), int64(i)))
	}
	call(s.MergeAll(ctx)).must(t)
	want := allRows(t, s, SourceAll)

	held := mustReserve(t, budget, budget.Limit())
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := s.CompactBase(short, CompactParams{MaxRuns: -1})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a pass waits for the budget, it does not overdraw it")
	require.Equal(t, want, allRows(t, s, SourceAll))
	held.Release()

	res := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, res.Committed)
	require.Equal(t, 1, res.RunsLeft)
	require.Zero(t, budget.Reserved(), "the pass released its reservation")
	require.Equal(t, want, allRows(t, s, SourceAll))
}

// A pass over runs many record batches long pages through them (arrowio_runs.go): the rows
// come back identical (newest version per key, tombstones dropped by the rule), its
// allocations stay within what it reserved (checked by the allocator under -race), and every
// byte goes back to the budget.
func TestCompactBaseStreamsRunsInBatches(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(64 << 20)
	db, s := newGenericStore(t, "file://"+t.TempDir()+"?nosync=1", "batches", func(o *Options) { o.MergeMaxGenerations = 1; o.Budget = budget })
	pad := strings.Repeat("v", 180)
	const rows = 12000
	for g := 0; g < 3; g++ {
		var rs []Row
		for i := 0; i < rows; i++ {
			k := fmt.Sprintf("k%06d", i*3+g%2) // runs 0 and 2 share keys, run 1 interleaves
			rs = append(rs, keyRow(k, int64(g*rows+i), fmt.Sprintf("%s%d", pad, g)))
		}
		seal(t, s, rs...)
		if g == 2 {
			var keys []string
			for i := 0; i < rows; i += 5 {
				keys = append(keys, fmt.Sprintf("k%06d", i*3))
			}
			deleteKeys(t, s, keys...)
			flush(t, s)
		}
		call(s.MergeAll(ctx)).must(t)
	}
	want := bigList(t, s)
	require.NotEmpty(t, want)

	base := call(s.loadBase(ctx)).must(t)
	require.GreaterOrEqual(t, len(base.Runs), 3)
	rb := call(openRunBatches(ctx, memory.DefaultAllocator, getObject(t, db.bucket, base.Runs[0].Path), s.codec, "run")).must(t)
	batches := 0
	for {
		f := call(rb.next(ctx)).must(t)
		if f == nil {
			break
		}
		batches++
		f.rec.Release()
	}
	rb.close()
	require.Greater(t, batches, 2, "a run of %d rows must span several batches of %d", rb.rows, rb.batchRows)

	res := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, res.Committed)
	require.Equal(t, 1, res.RunsLeft)
	require.Equal(t, want, bigList(t, s))
	require.Zero(t, budget.Reserved(), "the pass released its reservation")
	require.Zero(t, budget.Allocated(), "every buffer of the pass went back")
	require.LessOrEqual(t, budget.Pooled(), budget.Limit())
}

// bigList lists every row as id -> n and s, in pages of 10,000.
func bigList(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	after := ""
	for {
		page := call(s.List(context.Background(), ListOptions{Limit: 10000, After: after})).must(t)
		for _, r := range page.Rows {
			out[r["id"].(string)] = fmt.Sprint(r["n"], "/", r["s"])
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

// A pass's inputs read from storage that reports no length (an S3-compatible server that sends
// no Content-Length) outgrow their first buffers: what the pass counts as held by each read is
// every buffer the account was charged for, not the capacity of the bytes it kept.
func TestCompactionCountsTheBuffersItsInputsOutgrew(t *testing.T) {
	ctx := context.Background()
	url := s3test.NoLengthBucketURL(t, "compactheld")
	budget := NewBudget(64 << 20)
	_, s := newGenericStore(t, url, "compactheld", func(o *Options) { o.MergeMaxGenerations = 1; o.Budget = budget })
	for g := 0; g < 3; g++ {
		var rs []Row
		for i := 0; i < 200; i++ {
			rs = append(rs, keyRow(fmt.Sprintf("k%04d", i*3+g), int64(i), compressiblePad))
		}
		seal(t, s, rs...)
	}
	call(s.MergeAll(ctx)).must(t)
	want := allRows(t, s, SourceAll)
	snap := call(s.snapshot(ctx, false)).must(t)
	require.Len(t, snap.base.Runs, 3)

	res := mustReserve(t, budget, 16<<20)
	acct := newMemAccount(res, budget)
	ins, release, err := s.readCompactInputs(ctx, acct, snap.base.Runs)
	require.NoError(t, err)
	var held int64
	for _, in := range ins {
		require.Greater(t, in.buf.held, int64(cap(in.data)), "the read outgrew the 0 bytes reported")
		held += in.buf.held
	}
	require.Equal(t, acct.Allocated(), held, "the inputs hold what the account was charged")
	require.Greater(t, compactNeed(ins), held)
	release()
	require.Zero(t, acct.Allocated())
	res.Release()

	out := call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, out.Committed)
	require.Equal(t, 1, out.RunsLeft)
	require.Zero(t, budget.Reserved())
	require.Equal(t, want, allRows(t, s, SourceAll))
}
