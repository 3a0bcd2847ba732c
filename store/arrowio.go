package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// WAL objects and generations are Arrow IPC *files*: the footer makes a truncated object
// fail to decode instead of silently yielding a prefix of its rows.
func encodeIPC(schema *arrow.Schema, recs ...arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeIPC reads every record of an IPC file and checks it against the store schema.
// Any decode failure is ErrCorrupt: the object will never read differently.
func decodeIPC(data []byte, c *Codec, what string) (recs []arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil { // arrow's readers panic on some garbled inputs
			releaseAll(recs)
			recs, err = nil, corruptf("%s: %v", what, r)
		}
	}()
	rd, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	defer rd.Close()
	for i := 0; i < rd.NumRecords(); i++ {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			releaseAll(recs)
			return nil, corruptf("%s: record %d: %v", what, i, err)
		}
		if err := c.CheckRecord(rec); err != nil {
			releaseAll(recs)
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	return recs, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// parquetRowGroup bounds row-group size so that readers can stream large runs.
const parquetRowGroup = 64 * 1024

// encodeParquet writes one base run. Snappy keeps encode cheap; DuckDB, Spark and
// pyarrow all read it.
func encodeParquet(schema *arrow.Schema, rec arrow.RecordBatch) ([]byte, error) {
	// Size the buffer once: regrowing a many-MiB buffer zeroes and copies it repeatedly.
	buf := bytes.NewBuffer(make([]byte, 0, recordBytes(rec)/2+4096))
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(parquetRowGroup),
		parquet.WithStats(true),
		// Keys and payloads are mostly unique, so dictionary encoding costs a hash-table
		// probe per value (the top of the prepare profile) and saves nothing; the shard
		// column is the one with few distinct values.
		parquet.WithDictionaryDefault(false),
		parquet.WithDictionaryFor(ColShard, true),
	)
	w, err := pqarrow.NewFileWriter(schema, buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeParquet reads a whole run into one record with the store's Arrow schema.
func decodeParquet(ctx context.Context, data []byte, c *Codec, what string) (rec arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, corruptf("%s: %v", what, r)
		}
	}()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: parquetRowGroup}, memory.DefaultAllocator)
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, corruptf("%s: %v", what, err)
	}
	defer tbl.Release()
	want := c.ArrowSchema()
	if int(tbl.NumCols()) != want.NumFields() {
		return nil, corruptf("%s: %d columns, want %d", what, tbl.NumCols(), want.NumFields())
	}
	cols := make([]arrow.Array, tbl.NumCols())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i := 0; i < int(tbl.NumCols()); i++ {
		col := tbl.Column(i)
		if !arrow.TypeEqual(col.DataType(), want.Field(i).Type) || col.Name() != want.Field(i).Name {
			return nil, corruptf("%s: column %d is %s %s, want %s %s", what, i, col.Name(), col.DataType(), want.Field(i).Name, want.Field(i).Type)
		}
		chunks := col.Data().Chunks()
		if len(chunks) == 1 {
			chunks[0].Retain()
			cols[i] = chunks[0]
			continue
		}
		if len(chunks) == 0 {
			b := array.NewBuilder(memory.DefaultAllocator, want.Field(i).Type)
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		a, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			return nil, corruptf("%s: %v", what, err)
		}
		cols[i] = a
	}
	out := array.NewRecordBatch(want, cols, tbl.NumRows())
	if err := c.CheckRecord(out); err != nil {
		out.Release()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// recordBytes is the in-memory size of a record, the unit of the merge budget.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		if d, ok := col.Data().(*array.Data); ok {
			n += int64(d.SizeInBytes())
		}
	}
	return n
}
