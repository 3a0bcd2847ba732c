package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// runBatchBytes is the decoded size a batch of a run aims at.
const runBatchBytes = 1 << 20

// runPageScratchMax bounds what the reader holds per column for the page it decodes: about
// parquetPageSize (1 MiB in older runs) plus the last write batch's values.
const runPageScratchMax = 4 << 20

// runRowBytesMax caps the bytes per row a footer can make a batch's window count.
const runRowBytesMax = 1 << 40

// runDecodedMax caps the decoded size a footer can claim, so that the sum cannot wrap.
const runDecodedMax = 1 << 60

// runRowsPerByte bounds a run's rows by its size: every row has a distinct key, stored in at
// least 4 bytes (its length) that Snappy shrinks at most 64/3 times.
const runRowsPerByte = 6

// runBatchRowOverhead is the Arrow size per row beyond the Parquet plain size of its values:
// a validity bit and an offset per column, and the shard id as one string per row (at most 64
// bytes).
const runBatchRowOverhead = 8 + 4 + 64

// runBatches streams one base run in checked record batches of the caller's allocator, so
// its decoded size never has to fit at once.
type runBatches struct {
	pf *file.Reader
	fr *pqarrow.FileReader
	rr pqarrow.RecordReader // opened by the first next
	// rowGroups are the row groups read (nil: all), selected their rows and handed the rows
	// handed out.
	rowGroups []int
	selected  int64
	handed    int64
	c         *rowcodec.Codec
	what      string
	rows      int64 // the run's row count, from its footer
	// decoded is the uncompressed size its footer gives, about what a whole decode holds.
	decoded int64
	// window is what the reader may hold at once: two batches and page scratch.
	batchRows int64
	window    int64
	last      string // the last key of the previous batch (a copy), once handed > 0
	done      bool
}

// openRunBatches opens run data for batches decoded into mem, reading only its footer.
func openRunBatches(ctx context.Context, mem memory.Allocator, data []byte, c *rowcodec.Codec, what string) (_ *runBatches, err error) {
	rb := &runBatches{c: c, what: what}
	defer func() {
		if r := recover(); r != nil {
			err = corruptf("%s: %v", what, r)
		}
		if err != nil {
			rb.close()
		}
	}()
	if err := checkRunFooter(data); err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	props := parquet.NewReaderProperties(mem)
	// Pages are read through a small buffer, not as whole column chunks copied to the heap.
	props.BufferedStreamEnabled = true
	props.BufferSize = 64 << 10
	pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(props))
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	rb.pf, rb.rows, rb.selected = pf, pf.NumRows(), pf.NumRows()
	// The reader reserves a batch's levels and values for the rows the footer declares.
	rowsMax := runRowsPerByte * int64(len(data))
	if rb.rows < 0 || rb.rows > rowsMax {
		return nil, corruptf("%s: footer declares %d rows in %d bytes", what, rb.rows, len(data))
	}
	md := pf.MetaData()
	var perRow, scratch, groupRows int64 = 1, 0, 0
	for g := 0; g < pf.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		if n := rg.NumRows(); n < 0 || n > rowsMax-groupRows {
			return nil, corruptf("%s: row group %d declares %d rows in %d bytes", what, g, n, len(data))
		}
		groupRows += rg.NumRows()
		rb.decoded = min(rb.decoded+min(max(rg.TotalByteSize(), 0), runDecodedMax), runDecodedMax)
		if n := rg.NumRows(); n > 0 {
			perRow = max(perRow, rg.TotalByteSize()/n)
		}
		var s int64
		for col := 0; col < rg.NumColumns(); col++ {
			cc, err := rg.ColumnChunk(col)
			if err != nil {
				return nil, corruptf("%s: row group %d column %d: %v", what, g, col, err)
			}
			s += min(max(cc.TotalUncompressedSize(), 0)+max(cc.TotalCompressedSize(), 0), runPageScratchMax)
		}
		scratch = max(scratch, s)
	}
	// Capped, a footer's claim cannot wrap the window negative.
	perRow = min(perRow, runRowBytesMax) + runBatchRowOverhead
	rb.batchRows = min(max(runBatchBytes/perRow, 64), parquetRowGroup)
	rb.window = 2*min(rb.batchRows, max(rb.rows, 1))*perRow + scratch
	if err := checkStoredArrowSchema(md.KeyValueMetadata(), c.ArrowSchema()); err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: rb.batchRows}, mem)
	if err != nil {
		return nil, corruptf("%s: %v", what, err)
	}
	if err := checkRunSchema(fr, c.ArrowSchema(), what); err != nil {
		return nil, err
	}
	rb.fr = fr
	return rb, nil
}

// whole makes the next batch the whole run: one record, each column decoded into one array
// (no concatenation of chunks). Call before the first next.
func (rb *runBatches) whole() {
	rb.batchRows = max(rb.rows, 1)
	rb.fr.Props.BatchSize = rb.batchRows // read by the record reader the first next opens
}

// keyRowGroups restricts the batches to the row groups whose key statistics may hold key
// (all of them where a row group has none). Call before the first next.
func (rb *runBatches) keyRowGroups(key string) {
	rb.selectRowGroups(func(rg *metadata.RowGroupMetaData) bool {
		lo, hi, ok := keyStats(rg, rb.c.KeyIndex())
		return !ok || lo <= key && key <= hi
	})
}

// rowGroupsAfter skips the leading row groups whose max key is at most after; call before
// the first next.
func (rb *runBatches) rowGroupsAfter(after string) {
	started := false
	rb.selectRowGroups(func(rg *metadata.RowGroupMetaData) bool {
		if !started {
			_, hi, ok := keyStats(rg, rb.c.KeyIndex())
			started = !ok || hi > after
		}
		return started
	})
}

// selectRowGroups keeps the row groups keep accepts, in order.
func (rb *runBatches) selectRowGroups(keep func(rg *metadata.RowGroupMetaData) bool) {
	md := rb.pf.MetaData()
	rb.rowGroups, rb.selected = []int{}, 0
	for g := 0; g < rb.pf.NumRowGroups(); g++ {
		if rg := md.RowGroup(g); keep(rg) {
			rb.rowGroups = append(rb.rowGroups, g)
			rb.selected += rg.NumRows()
		}
	}
	rb.done = len(rb.rowGroups) == 0 // next has nothing to read
}

// keyStats returns a row group's min and max key, ok false without statistics (the writer
// drops long ones).
func keyStats(rg *metadata.RowGroupMetaData, keyCol int) (lo, hi string, ok bool) {
	cc, err := rg.ColumnChunk(keyCol)
	if err != nil {
		return "", "", false
	}
	if set, err := cc.StatsSet(); err != nil || !set {
		return "", "", false
	}
	st, err := cc.Statistics()
	bs, isBytes := st.(*metadata.ByteArrayStatistics)
	if err != nil || !isBytes || !bs.HasMinMax() {
		return "", "", false
	}
	return string(bs.Min()), string(bs.Max()), true
}

// checkRunSchema checks the run's Arrow schema against the store's, column by column.
func checkRunSchema(fr *pqarrow.FileReader, want *arrow.Schema, what string) error {
	got, err := fr.Schema()
	if err != nil {
		return corruptf("%s: %v", what, err)
	}
	if got.NumFields() != want.NumFields() {
		return corruptf("%s: %d columns, want %d", what, got.NumFields(), want.NumFields())
	}
	for i := 0; i < want.NumFields(); i++ {
		g, w := got.Field(i), want.Field(i)
		if !arrow.TypeEqual(g.Type, w.Type) || g.Name != w.Name {
			return corruptf("%s: column %d is %s %s, want %s %s", what, i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	return nil
}

// next returns the run's next batch as a sortedFile, or nil at the end. The caller releases
// the batch's record; it stays valid after later calls.
func (rb *runBatches) next(ctx context.Context) (f *sortedFile, err error) {
	if rb.done {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			if f != nil {
				f.rec.Release()
			}
			f, err = nil, corruptf("%s: %v", rb.what, r)
		}
	}()
	if rb.rr == nil {
		rb.rr, err = rb.fr.GetRecordReader(ctx, nil, rb.rowGroups)
	}
	if err == nil && !rb.rr.Next() {
		rb.done, err = true, rb.rr.Err()
		if err == nil {
			return nil, nil
		}
	}
	if err != nil {
		rb.done = true
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, corruptf("%s: %v", rb.what, err)
	}
	got := rb.rr.RecordBatch()
	rec := array.NewRecordBatch(rb.c.ArrowSchema(), got.Columns(), got.NumRows())
	if err := rb.c.CheckRecord(rec); err != nil {
		rec.Release()
		return nil, fmt.Errorf("%s: %w", rb.what, err)
	}
	if err := validateBuffers(rec); err != nil {
		rec.Release()
		return nil, corruptf("%s: %v", rb.what, err)
	}
	f, err = newSortedFile(rb.c, rb.what, rec, rb.last, rb.handed > 0)
	if err != nil {
		rec.Release()
		return nil, err
	}
	if f.n > 0 {
		rb.last = strings.Clone(f.view.Key(f.n - 1))
	}
	rb.handed += int64(f.n)
	return f, nil
}

// close releases the reader (not the batches handed out).
func (rb *runBatches) close() {
	if rb.rr != nil {
		rb.rr.Release()
		rb.rr = nil
	}
	if rb.pf != nil {
		_ = rb.pf.Close()
		rb.pf = nil
	}
}
