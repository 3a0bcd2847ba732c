package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// decodeParquet is decodeParquetAdmitted admitting every decode.
func decodeParquet(ctx context.Context, data []byte, c *rowcodec.Codec, what string) (*sortedFile, error) {
	return decodeParquetAdmitted(ctx, data, c, what, func(int64) error { return nil })
}

// decodeRunErr decodes data as a run of c and returns only the error.
func decodeRunErr(c *rowcodec.Codec, data []byte) error {
	f, err := decodeParquet(context.Background(), data, c, "run")
	if f != nil {
		f.rec.Release()
	}
	return err
}

// TestParquetEncodingsPerColumn: a run is written with the encodings docs/FORMAT.md §1
// lists (PLAIN, and a dictionary for the shard column of a run of many shards only), in
// data pages of about parquetPageSize, and reads back to the same rows, returning every
// buffer the reader took.
func TestParquetEncodingsPerColumn(t *testing.T) {
	c := call(rowcodec.NewCodec(KindGeneric, testSchema)).must(t)
	schema := c.ArrowSchema()
	build := func(shards ...string) arrow.RecordBatch {
		rows := make([]Row, 20000)
		seqs := make([]int64, len(rows))
		for i := range rows {
			rows[i] = keyRow(fmt.Sprintf("k%08d", i), int64(i*7), fmt.Sprintf("value %d", i%13))
			seqs[i] = 1_700_000_000_000_000_000 + int64(i)*1000
		}
		rec := call(c.Build(memory.DefaultAllocator, rows, seqs, shards[0], nil)).must(t)
		if len(shards) == 1 {
			return rec
		}
		// Interleave the shards as compaction does: rebuild the shard column row by row.
		defer rec.Release()
		picks := make([]pick, rec.NumRows())
		files := make([]*sortedFile, len(shards))
		for i, sh := range shards {
			r := call(c.Build(memory.DefaultAllocator, rows, seqs, sh, nil)).must(t)
			t.Cleanup(r.Release)
			files[i] = &sortedFile{rec: r}
		}
		for i := range picks {
			picks[i] = pick{f: files[i%len(files)], i: i}
		}
		return copyRows(nil, schema, picks)
	}
	for _, tc := range []struct {
		name      string
		shards    []string
		shardEnc  parquet.Encoding
		shardDict bool
	}{
		{"one shard", []string{"s1"}, parquet.Encodings.Plain, false},
		{"many shards", []string{"s1", "s2", "s3"}, parquet.Encodings.RLEDict, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := build(tc.shards...)
			defer rec.Release()
			pf, data := openEncoded(t, schema, rec)
			rg := pf.MetaData().RowGroup(0)
			encodings := func(name string) []parquet.Encoding {
				i := schema.FieldIndices(name)[0]
				cc := call(rg.ColumnChunk(i)).must(t)
				return cc.Encodings()
			}
			for _, col := range []string{"id", "n", "s", rowcodec.ColSeq, rowcodec.ColDeleted} {
				require.Equal(t, []parquet.Encoding{parquet.Encodings.Plain}, plainOnly(encodings(col)), col)
			}
			require.Contains(t, encodings(rowcodec.ColShard), tc.shardEnc)
			if !tc.shardDict {
				require.False(t, slices.Contains(encodings(rowcodec.ColShard), parquet.Encodings.RLEDict), "a one-shard run needs no dictionary")
			}

			// Pages: the payload-sized string column spans several pages of at most
			// about parquetPageSize each (plus one write batch).
			cr := call(pf.RowGroup(0).GetColumnPageReader(schema.FieldIndices("s")[0])).must(t)
			pages := 0
			for cr.Next() {
				pages++
				require.LessOrEqual(t, len(cr.Page().Data()), 2*parquetPageSize)
			}
			require.NoError(t, cr.Err())
			require.Greater(t, pages, 1)

			budget := NewBudget(1 << 30)
			acct := newMemAccount(mustReserve(t, budget, 1<<30), budget)
			rb := call(openRunBatches(context.Background(), acct, data, c, "run")).must(t)
			rb.whole()
			f := call(rb.next(context.Background())).must(t)
			got := f.rec
			defer func() {
				got.Release()
				rb.close()
				require.Zero(t, acct.Allocated(), "the reader returns every buffer")
			}()
			require.Equal(t, rec.NumRows(), got.NumRows())
			for col := 0; col < int(rec.NumCols()); col++ {
				require.Truef(t, array.Equal(rec.Column(col), got.Column(col)), "column %s", schema.Field(col).Name)
			}
		})
	}
}

// plainOnly drops the level encodings (RLE, BIT_PACKED) a column chunk lists besides its
// values' encodings.
func plainOnly(encs []parquet.Encoding) []parquet.Encoding {
	var out []parquet.Encoding
	for _, e := range encs {
		if e != parquet.Encodings.RLE && e != parquet.Encodings.BitPacked && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// openEncoded writes rec with encodeParquet and opens the bytes as a Parquet file, closed
// when the test ends.
func openEncoded(t *testing.T, schema *arrow.Schema, rec arrow.RecordBatch) (*file.Reader, []byte) {
	t.Helper()
	data := call(encodeParquet(schema, rec)).must(t)
	pf := call(file.NewParquetReader(bytes.NewReader(data))).must(t)
	t.Cleanup(func() { _ = pf.Close() })
	return pf, data
}

// encodeParquet writes one base run into memory, for tests that want a run's bytes.
func encodeParquet(schema *arrow.Schema, rec arrow.RecordBatch) ([]byte, error) {
	// Size the buffer once from the record: regrowing a many-MiB buffer zeroes and copies it
	// repeatedly, and incompressible payloads encode to about their in-memory size.
	buf := bytes.NewBuffer(make([]byte, 0, recordBytes(rec)+64<<10))
	rec.Retain() // writeParquet releases what next hands it
	done := false
	err := writeParquet(buf, schema, func() (arrow.RecordBatch, error) {
		if done {
			return nil, nil
		}
		done = true
		return rec, nil
	})
	if !done {
		rec.Release()
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeParquet is writeParquetWith on the Go heap.
func writeParquet(w io.Writer, schema *arrow.Schema, next func() (arrow.RecordBatch, error)) error {
	return writeParquetWith(memory.DefaultAllocator, w, schema, next)
}

// An IPC file is written into a buffer sized from its records at once: grown by doubling, a
// generation allocated about twice its size and was copied through every step, which under
// the race detector was the costliest part of a flush of large rows.
func TestEncodeIPCAllocatesItsFileOnce(t *testing.T) {
	c := call(rowcodec.NewCodec(KindGeneric, testSchema)).must(t)
	value := string(bytes.Repeat([]byte("v"), 4<<10))
	rows := make([]Row, 2048)
	seqs := make([]int64, len(rows))
	for i := range rows {
		rows[i] = keyRow(fmt.Sprintf("k%08d", i), int64(i), value)
		seqs[i] = int64(i + 1)
	}
	rec := call(c.Build(memory.DefaultAllocator, rows, seqs, "s0", nil)).must(t)
	defer rec.Release()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, err := encodeIPC(c.ArrowSchema(), rec)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(len(data))*5/4, "encoding a %d-byte file allocated %d bytes", len(data), allocated)
}
