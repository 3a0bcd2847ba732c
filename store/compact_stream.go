package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// A compaction pass streams, so that its memory is bounded by its budget, not by its runs: it
// decodes each run a record batch at a time (arrowio_runs.go), merges the batches and writes
// the output chunk by chunk (Bucket.PutFrom), every buffer from the pass's memAccount.

// compactOutputWindow is what the output side of a pass holds at once: the picks and the
// chunk being copied out (compactChunkBytes), the batches that chunk still refers to (up to
// compactRetiredMax) and the Parquet writer's page and write buffers.
const compactOutputWindow = 2*compactChunkBytes + compactRetiredMax + 4<<20

// compactChunkBytes is the size of the output chunks (row groups) of a pass.
const compactChunkBytes = 4 << 20

// compactRetiredMax bounds the bytes of input batches a pass has moved past but whose picked
// rows are not yet copied out: beyond it, the chunk is written early.
const compactRetiredMax = compactChunkBytes

// compactRunWindow is the reservation per input run before its footer gives the real one
// (runBatches.window): two batches and the page scratch of a typical run.
const compactRunWindow = 2*runBatchBytes + 2<<20

func compactRunGuess(r manifest.Run) int64 {
	return min(compactRunWindow, 4*min(max(r.Bytes, 0), compactRunWindow)+64<<10) // no wrap near 2^63
}

// compactInput is one input run of a pass: its object bytes, the buffers its read holds (more
// than data's capacity when the object outgrew the size its storage reported) and its
// footer's bounds.
type compactInput struct {
	meta   manifest.Run
	data   []byte
	buf    *readBuf
	window int64
}

// readCompactInputs reads and checks the inputs into buffers of acct; the caller releases.
func (s *Store) readCompactInputs(ctx context.Context, acct *memAccount, inputs []manifest.Run) (_ []*compactInput, release func(), _ error) {
	var ins []*compactInput
	release = func() { // idempotent
		for _, in := range ins {
			in.buf.free()
		}
		ins = nil
	}
	for _, r := range inputs {
		buf := acct.readBuffer(0)
		data, err := s.readRunObject(ctx, r.Path, r.Checksum, r.Bytes, buf.alloc)
		if err != nil {
			buf.free()
			if errors.Is(err, errBufferRefused) {
				err = fmt.Errorf("run %s is larger than the pass reserved: %w", r.ID, ErrBudgetBusy)
			}
			return nil, release, fmt.Errorf("read run %s: %w", r.ID, err)
		}
		in := &compactInput{meta: r, data: data, buf: buf}
		ins = append(ins, in)
		what := "run " + r.Path
		rb, err := openRunBatches(ctx, acct, data, s.codec, what)
		if err != nil {
			s.countCorrupt(r.Path, err)
			return nil, release, fmt.Errorf("read run %s: %w", r.ID, err)
		}
		in.window = rb.window
		rb.close()
	}
	return ins, release, nil
}

// compactNeed is a pass's peak: the objects, each run's reader window and the output window.
func compactNeed(ins []*compactInput) int64 {
	n := int64(compactOutputWindow)
	for _, in := range ins {
		n += in.buf.held + in.window
	}
	return n
}

// compactOutput is what streaming a pass produced: the input rows, the tombstones dropped,
// and the output's rows and bounds in run.
type compactOutput struct {
	rowsIn, dropped int64
	run             manifest.Run
}

// addRunRow adds row i of f, the next in key order, to the rows and bounds of r; the caller
// sets MaxKey once, since cloning every key would cost a copy per row.
func addRunRow(r *manifest.Run, f *sortedFile, i int) {
	seq := f.view.Seq(i)
	if r.Rows == 0 {
		r.MinKey, r.MinSeq, r.MaxSeq = strings.Clone(f.view.Key(i)), seq, seq
	}
	r.Rows++
	r.MinSeq, r.MaxSeq = min(r.MinSeq, seq), max(r.MaxSeq, seq)
	if f.view.Deleted(i) {
		r.Deletes++
	}
}

// writeCompacted merges ins into one run written to w, a batch at a time, starting over from
// the objects' bytes when a write is retried, dropping the surviving tombstones plan allows.
func (s *Store) writeCompacted(ctx context.Context, acct *memAccount, w io.Writer, ins []*compactInput, plan compactionPlan) (out compactOutput, err error) {
	schema := s.codec.ArrowSchema()
	var readers []*runBatches
	var live []*sortedFile // batches handed out and not yet released
	defer func() {
		for _, rb := range readers {
			rb.close()
		}
		for _, f := range live {
			f.rec.Release()
		}
	}()
	var retired []*sortedFile // batches cursors moved past whose picks are not copied out yet
	var retiredBytes int64
	var ferr error
	cursors := make([]*cursor, 0, len(ins))
	var perRow int64 = 1
	for _, in := range ins {
		rb, err := openRunBatches(ctx, acct, in.data, s.codec, "run "+in.meta.Path)
		if err != nil {
			return out, err
		}
		readers = append(readers, rb)
		out.rowsIn += rb.rows
		perRow = max(perRow, rb.window/max(2*rb.batchRows, 1))
		c := &cursor{}
		c.refill = func(c *cursor) bool {
			if c.file != nil {
				retired = append(retired, c.file)
				retiredBytes += c.file.bytes
				c.file = nil
			}
			for {
				f, err := rb.next(ctx)
				if err != nil || f == nil {
					if ferr == nil {
						ferr = err
					}
					return false
				}
				live = append(live, f)
				if f.n > 0 {
					c.file, c.i = f, 0
					return true
				}
			}
		}
		if c.refill(c) {
			cursors = append(cursors, c)
		}
		if ferr != nil {
			return out, ferr
		}
	}
	it := newMergeIter(cursors)
	chunkRows := int(min(max(compactChunkBytes/perRow, 64), parquetRowGroup))
	picks := make([]pick, 0, chunkRows)
	picksCharge := int64(cap(picks)) * int64(unsafe.Sizeof(pick{}))
	if !acct.tryCharge(picksCharge) {
		return out, fmt.Errorf("compaction of %d runs: %w", len(ins), ErrBudgetBusy)
	}
	defer acct.uncharge(picksCharge)
	// releaseRetired frees the batches no pick refers to any more.
	releaseRetired := func() {
		for _, f := range retired {
			f.rec.Release()
		}
		live = slices.DeleteFunc(live, func(l *sortedFile) bool { return slices.Contains(retired, l) })
		retired, retiredBytes = retired[:0], 0
	}
	varCols := varWidthColumns(schema)
	first, ended := true, false
	err = writeParquetWith(acct, w, schema, func() (arrow.RecordBatch, error) {
		if err := acct.err(); err != nil {
			return nil, err
		}
		if ended {
			return nil, nil
		}
		for {
			picks = picks[:0]
			// chunkRows comes of the inputs' average row: the byte bound keeps a stretch of
			// large rows to one chunk's worth too.
			var chunkBytes int64
			for len(picks) < chunkRows && chunkBytes < compactChunkBytes && retiredBytes <= compactRetiredMax {
				h, ok := it.next()
				f, i := h.f, h.i
				if ferr != nil {
					return nil, ferr
				}
				if !ok {
					ended = true
					break
				}
				if f.view.Deleted(i) && plan.dropsTombstone(f.view.Seq(i)) {
					out.dropped++
					continue
				}
				picks = append(picks, pick{f, i})
				chunkBytes += pickBytes(pick{f, i}, varCols)
				addRunRow(&out.run, f, i)
			}
			if len(picks) > 0 || first {
				// The first record is written even when empty: a run has at least one.
				first = false
				if len(picks) > 0 {
					out.run.MaxKey = strings.Clone(picks[len(picks)-1].key())
				}
				rec := copyRows(acct, schema, picks)
				releaseRetired() // the record holds copies
				return rec, nil
			}
			releaseRetired() // only dropped rows since the last chunk
			if ended {
				return nil, nil
			}
		}
	})
	return out, err
}
