package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// runOf encodes rows rows of a compressible payload as a base run of 8,000-row row groups,
// as merges write them.
func runOf(t *testing.T, c *rowcodec.Codec, rows, payload int) []byte {
	t.Helper()
	var rs []Row
	var seqs []int64
	pad := strings.Repeat("v", payload)
	for i := 0; i < rows; i++ {
		k := fmt.Sprintf("k%07d", i)
		rs = append(rs, keyRow(k, int64(i), pad+k))
		seqs = append(seqs, int64(i))
	}
	rec := call(c.Build(nil, rs, seqs, "shard-1", nil)).must(t)
	defer rec.Release()
	var buf bytes.Buffer
	var parts []arrow.RecordBatch
	for off := int64(0); off < int64(rows); off += 8000 {
		parts = append(parts, rec.NewSlice(off, min(off+8000, int64(rows))))
	}
	require.NoError(t, writeParquetRecs(&buf, c.ArrowSchema(), parts...))
	return buf.Bytes()
}

// writeParquetRecs writes recs (released here) as one run, a row group each.
func writeParquetRecs(w *bytes.Buffer, schema *arrow.Schema, recs ...arrow.RecordBatch) error {
	i := 0
	return writeParquet(w, schema, func() (arrow.RecordBatch, error) {
		if i == len(recs) {
			return nil, nil
		}
		i++
		return recs[i-1], nil
	})
}

// A run read in batches holds at most its footer's window (checked against the allocator's
// peak), a small part of what decoding it whole holds, and yields the same rows.
func TestRunBatchesStayWithinTheirWindow(t *testing.T) {
	ctx := context.Background()
	c := call(rowcodec.NewCodec(KindGeneric, testSchema)).must(t)
	data := runOf(t, c, 20000, 1000)

	budget := NewBudget(1 << 30)
	whole := newPeakAlloc(newMemAccount(mustReserve(t, budget, 1<<30), budget))
	rb := call(openRunBatches(ctx, whole, data, c, "run")).must(t)
	rb.whole()
	all := call(rb.next(ctx)).must(t)
	rb.close()
	wholePeak := whole.Peak()
	whole.res.Release()

	res := mustReserve(t, budget, 1<<30)
	defer res.Release()
	acct := newPeakAlloc(newMemAccount(res, budget))
	rb = call(openRunBatches(ctx, acct, data, c, "run")).must(t)
	rows, batches := 0, 0
	for {
		f := call(rb.next(ctx)).must(t)
		if f == nil {
			break
		}
		for i := 0; i < f.n; i++ {
			require.Equal(t, all.view.Key(rows+i), f.view.Key(i))
			require.Equal(t, all.rec.Column(2).ValueStr(rows+i), f.rec.Column(2).ValueStr(i))
		}
		rows += f.n
		batches++
		f.rec.Release()
	}
	all.rec.Release()
	require.Equal(t, 20000, rows)
	t.Logf("run %d bytes, %d rows: whole decode peak %d KiB; %d batches of %d rows: peak %d KiB, window %d KiB",
		len(data), rows, wholePeak>>10, batches, rb.batchRows, acct.Peak()>>10, rb.window>>10)
	require.Greater(t, batches, 10)
	require.LessOrEqual(t, acct.Peak(), rb.window, "the footer's window bounds what the batches hold")
	require.Less(t, acct.Peak()*4, wholePeak)
	rb.close()
	require.Zero(t, acct.Allocated(), "closing the reader frees its buffers")
}

// A run whose footer claims a row group of about 2^62 bytes (its checksum matches: the writer
// was wrong, not the storage) gets a window that still bounds what its batches hold: the
// window must not wrap negative and let a read or compaction decode without reserving.
func TestRunWindowOfAHugeFooterClaimDoesNotWrap(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, newMemURL(), "fw")
	rec := call(s.codec.Build(nil, []Row{row("a", 1), row("b", 2), row("c", 3), row("d", 4)}, []int64{1, 2, 3, 4}, db.Shard(), nil)).must(t)
	var run bytes.Buffer
	require.NoError(t, writeParquetRecs(&run, s.codec.ArrowSchema(), rec))
	data := run.Bytes()
	budget := NewBudget(1 << 30)
	acct := newPeakAlloc(newMemAccount(mustReserve(t, budget, 1<<20), budget))
	rb := call(openRunBatches(ctx, acct, data, s.codec, "run")).must(t)
	md := rb.pf.MetaData().RowGroup(0)
	total, rows := md.TotalByteSize(), md.NumRows()
	rb.close()

	// The row group's total_byte_size (field 2) and num_rows (field 3), i64s in Thrift's
	// compact encoding, in the footer before the trailing length and magic.
	zigzag := func(v int64) []byte { return binary.AppendUvarint(nil, uint64((v<<1)^(v>>63))) }
	field := func(total int64) []byte {
		return append(append(append([]byte{0x16}, zigzag(total)...), 0x16), zigzag(rows)...)
	}
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - flen
	footer := data[start : len(data)-8]
	require.Equal(t, 1, bytes.Count(footer, field(total)))
	patched := bytes.Replace(footer, field(total), field(1<<62+4), 1)
	out := append(append([]byte(nil), data[:start]...), patched...)
	out = append(binary.LittleEndian.AppendUint32(out, uint32(len(patched))), "PAR1"...)

	rb = call(openRunBatches(ctx, acct, out, s.codec, "run")).must(t)
	defer rb.close()
	require.Equal(t, int64(1<<62+4), rb.pf.MetaData().RowGroup(0).TotalByteSize())
	for {
		f := call(rb.next(ctx)).must(t)
		if f == nil {
			break
		}
		f.rec.Release()
	}
	require.LessOrEqual(t, acct.Peak(), rb.window, "the footer's window bounds what the batches hold")
}
