package store

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// ipcFileOverhead and ipcFieldOverhead are generous bounds on an IPC file's framing (magic,
// footer, messages) and on one field's metadata and padding in its schema or in a record.
const (
	ipcFileOverhead  = 1 << 10
	ipcFieldOverhead = 256
)

// WAL objects and generations are Arrow IPC *files*: the footer makes a truncated object
// fail to decode instead of silently yielding a prefix of its rows.
func encodeIPC(schema *arrow.Schema, recs ...arrow.RecordBatch) ([]byte, error) {
	// The file is about its records' buffers plus their metadata: grown to that at once, a
	// 16 MiB generation is not copied through every doubling of the buffer on its way there.
	hint := int64(ipcFileOverhead + schema.NumFields()*ipcFieldOverhead)
	for _, r := range recs {
		hint += recordBytes(r) + int64(r.NumCols())*ipcFieldOverhead
	}
	// make, not Buffer.Grow, which copies a zeroed slice of the size into the new one.
	buf := bytes.NewBuffer(make([]byte, 0, hint))
	w, err := ipc.NewFileWriter(buf, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
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

// decodeIPC reads and checks every record of an IPC file (any failure is ErrCorrupt); the
// records alias data, so callers pass bytes that nothing else holds or modifies.
func decodeIPC(mem memory.Allocator, data []byte, c *rowcodec.Codec, what string) (_ []arrow.RecordBatch, err error) {
	var recs []arrow.RecordBatch
	defer func() {
		if r := recover(); r != nil { // arrow's readers panic on some garbled inputs
			err = corruptf("%s: %v", what, r)
		}
		if err != nil {
			releaseAll(recs)
		}
	}()
	if err := checkIPCFile(data, c.ArrowSchema()); err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	rd, err := ipc.NewMappedFileReader(data, ipc.WithAllocator(mem))
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	defer rd.Close()
	for i := 0; i < rd.NumRecords(); i++ {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			return nil, corruptf("%s: record %d: %v", what, i, err)
		}
		if err := c.CheckRecord(rec); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := validateBuffers(rec); err != nil {
			return nil, corruptf("%s: record %d: %v", what, i, err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	return recs, nil
}

// validateBuffers checks buffer sizes, bitmaps and value offsets, which arrow takes on trust
// and a consumer would trip over outside decodeIPC's recover.
func validateBuffers(rec arrow.RecordBatch) error {
	for c, col := range rec.Columns() {
		if err := array.Validate(col); err != nil {
			return fmt.Errorf("column %d: %w", c, err)
		}
		if col.Len() == 0 {
			continue
		}
		a, ok := col.(interface{ ValueOffsets() []int32 }) // string and binary
		if !ok {
			continue
		}
		offsets := a.ValueOffsets()
		if len(offsets) > 0 && offsets[0] < 0 {
			return fmt.Errorf("column %d: negative value offset", c)
		}
		for i := 1; i < len(offsets); i++ {
			if offsets[i] < offsets[i-1] {
				return fmt.Errorf("column %d: value offsets decrease at row %d", c, i)
			}
		}
	}
	return nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// parquetRowGroup bounds row-group size so that readers can stream large runs.
const parquetRowGroup = 64 * 1024

// parquetPageSize is small enough that pooled page buffers are reused.
const parquetPageSize = 128 << 10

// incompressibleRatio: a column Snappy cannot shrink below this fraction of its size is written
// raw.
const incompressibleRatio = 0.9

// compressionSample is how many value bytes per column the codec choice looks at.
const compressionSample = 256 << 10

// parquetProps are the writer properties of a base run (docs/FORMAT.md §1): compression and
// the shard column's encoding are chosen per column from sample, the first chunk written.
func parquetProps(mem memory.Allocator, schema *arrow.Schema, sample arrow.RecordBatch) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(parquetRowGroup),
		parquet.WithDataPageSize(parquetPageSize),
		parquet.WithStats(true),
		// Keys and payloads are mostly unique, so dictionary encoding costs a hash-table
		// probe per value (the top of the prepare profile) and saves nothing.
		parquet.WithDictionaryDefault(false),
		// Nothing filters on the writing shard; its min/max cost a comparison per value.
		parquet.WithStatsFor(rowcodec.ColShard, false),
	}
	// No column is delta-encoded: arrow-go's delta decoders allocate from the reader's allocator
	// and never free it, so every read of a delta-encoded run would leak budget charges.
	if !oneShard(sample) {
		// Compaction interleaves the rows of many shards: a few distinct values, the
		// dictionary's case. A merge's one shard id costs a few bytes per page plain.
		opts = append(opts, parquet.WithDictionaryFor(rowcodec.ColShard, true))
	}
	sampled := sample != nil && sample.NumRows() > 0
	if sampled {
		// A write batch near one data page, so wide rows do not regrow the encoder's buffer.
		perRow := max(recordBytes(sample)/sample.NumRows(), 1)
		opts = append(opts, parquet.WithBatchSize(min(max(parquetPageSize/perRow, 64), 1024)))
	}
	for c, f := range schema.Fields() {
		// No reader filters on payloads, so their min/max would only cost comparisons.
		if f.Type.ID() == arrow.BINARY {
			opts = append(opts, parquet.WithStatsFor(f.Name, false))
		}
		// The shard column is tiny and repetitive once encoded.
		if sampled && f.Name != rowcodec.ColShard && incompressible(sample.Column(c)) {
			opts = append(opts, parquet.WithCompressionFor(f.Name, compress.Codecs.Uncompressed))
		}
	}
	return parquet.NewWriterProperties(opts...)
}

// oneShard reports whether every row of sample has the same shard id.
func oneShard(sample arrow.RecordBatch) bool {
	if sample == nil || sample.NumRows() == 0 {
		return false
	}
	idx := sample.Schema().FieldIndices(rowcodec.ColShard)
	if len(idx) != 1 {
		return false
	}
	col, ok := sample.Column(idx[0]).(*array.String)
	if !ok || col.NullN() > 0 {
		return false
	}
	first := col.Value(0)
	for i := 1; i < col.Len(); i++ {
		if col.Value(i) != first {
			return false
		}
	}
	return true
}

// incompressible reports whether a string or binary column's values do not compress with
// Snappy, sampling up to compressionSample bytes from their start and middle.
func incompressible(col arrow.Array) bool {
	a, ok := col.(interface{ ValueBytes() []byte }) // string and binary
	if !ok {
		return false
	}
	values := a.ValueBytes()
	if len(values) < 4096 {
		return false // too little to judge, and too little to matter
	}
	half := min(len(values)/2, compressionSample/2)
	sample := [2][]byte{values[:half], values[len(values)/2 : len(values)/2+half]}
	codec, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		return false
	}
	var raw, packed int
	for _, part := range sample {
		raw += len(part)
		packed += len(codec.Encode(nil, part))
	}
	return float64(packed) >= incompressibleRatio*float64(raw)
}

// writeParquetWith streams one base run to w from the records next returns until nil (at
// least one), releasing each once written; the writer's buffers come from mem.
func writeParquetWith(mem memory.Allocator, w io.Writer, schema *arrow.Schema, next func() (arrow.RecordBatch, error)) error {
	rec, err := next()
	if err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("writeParquet: no records")
	}
	fw, err := pqarrow.NewFileWriter(schema, w, parquetProps(mem, schema, rec),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)))
	if err != nil {
		rec.Release()
		return err
	}
	for rec != nil && err == nil {
		err = fw.Write(rec)
		rec.Release()
		if err == nil {
			rec, err = next()
		}
	}
	if err != nil {
		_ = fw.Close()
		return err
	}
	return fw.Close()
}

// decodeParquetAdmitted decodes a whole run into one record on the Go heap once admit has
// accepted the size its footer gives; its peak is about twice the record, so reads that must
// bound memory read runs in batches (list_runs.go).
//
// openRunBatches and next recover arrow's panics on garbled inputs themselves.
func decodeParquetAdmitted(ctx context.Context, data []byte, c *rowcodec.Codec, what string, admit func(decoded int64) error) (*sortedFile, error) {
	rb, err := openRunBatches(ctx, memory.DefaultAllocator, data, c, what)
	if err != nil {
		return nil, err
	}
	defer rb.close()
	if err := admit(rb.decoded); err != nil {
		return nil, err
	}
	rb.whole()
	f, err := rb.next(ctx)
	if err != nil {
		return nil, err
	}
	if f == nil { // no rows
		return newSortedFile(c, what, copyRows(nil, c.ArrowSchema(), nil), "", false)
	}
	// A run of more than 2^31 rows or bytes per column may come in more than one batch.
	if g, err := rb.next(ctx); err != nil || g != nil {
		f.rec.Release()
		if g != nil {
			g.rec.Release()
			return nil, corruptf("%s: does not decode as one record", what)
		}
		return nil, err
	}
	return f, nil
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
