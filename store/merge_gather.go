package store

import (
	"cmp"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The rows that survive a merge (picks, merge_iter.go) gathered into Arrow records, chunk by
// chunk: for a prepare's staged run, and (copyRows) for compaction's output. Pure in-memory
// work on buffers charged to the caller's budget account; no lock.

// copyRows builds one record from picked rows, column by column (mem nil: the default
// allocator); variable-width columns reserve their value bytes up front, since doubling
// allocated about twice the output. The per-type loops are written out on purpose: a generic
// version measured about 35% slower here (shape stenciling makes every call a dictionary
// call).
func copyRows(mem memory.Allocator, schema *arrow.Schema, picks []pick) arrow.RecordBatch {
	mem = cmp.Or(mem, memory.DefaultAllocator)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for c := 0; c < schema.NumFields(); c++ {
		fb := b.Field(c)
		fb.Reserve(len(picks))
		switch bb := fb.(type) {
		case *array.StringBuilder:
			n := 0
			for _, p := range picks {
				n += p.f.rec.Column(c).(*array.String).ValueLen(p.i)
			}
			bb.ReserveData(n)
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.String)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.Int64Builder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Int64)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.Float64Builder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Float64)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.BooleanBuilder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Boolean)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.BinaryBuilder:
			n := 0
			for _, p := range picks {
				n += p.f.rec.Column(c).(*array.Binary).ValueLen(p.i)
			}
			bb.ReserveData(n)
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Binary)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.TimestampBuilder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Timestamp)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		default:
			panic(fmt.Sprintf("copyRows: unsupported builder %T", fb)) // schemas only hold the six types
		}
	}
	return b.NewRecordBatch()
}

// Runs: the picks of a merge often come in runs of consecutive rows of one input, so a chunk
// that is one run is written as a zero-copy slice of the input, a chunk of few long runs is
// gathered a bulk copy per run, and only chunks of short runs pay copyRows's per-row copy.

// minSliceRows is the shortest run that ends a chunk early so that the chunk is a zero-copy
// slice: shorter, the extra row group would cost more than the copy it saves.
const minSliceRows = 1024

// minBulkRunRows is the average run length from which gathering by runs beats copying row
// by row (each run costs a slice and a bulk copy per column).
const minBulkRunRows = 32

// runLen is the length of the run of consecutive rows of one input that starts at picks[0].
func runLen(picks []pick) int {
	if len(picks) == 0 {
		return 0
	}
	f, i := picks[0].f, picks[0].i
	n := 1
	for n < len(picks) && picks[n].f == f && picks[n].i == i+n {
		n++
	}
	return n
}

// chunkEnd is where the output chunk that starts at picks[off] ends: after chunkRows picks or
// at the pick that brings its variable-width values to maxBytes, whichever comes first, or
// earlier at the end of a run of at least minSliceRows that starts the chunk, so that the
// chunk is a slice of its input. chunkRows comes of the input's average row, so without the
// byte bound a stretch of large rows among small ones made a chunk many times maxBytes.
func chunkEnd(picks []pick, off, chunkRows int, maxBytes int64, varCols []int) int {
	end := min(off+chunkRows, len(picks))
	var n int64
	for i := off; i < end; i++ {
		if n += pickBytes(picks[i], varCols); n >= maxBytes {
			end = i + 1
			break
		}
	}
	if r := runLen(picks[off:end]); r >= minSliceRows {
		return off + r
	}
	return end
}

// varWidthColumns are the indexes of schema's string and binary columns, the ones whose
// values make one row larger than another.
func varWidthColumns(schema *arrow.Schema) []int {
	var cols []int
	for c, f := range schema.Fields() {
		if f.Type.ID() == arrow.STRING || f.Type.ID() == arrow.BINARY {
			cols = append(cols, c)
		}
	}
	return cols
}

// pickBytes is the value bytes of p's varCols (varWidthColumns of its record's schema).
func pickBytes(p pick, varCols []int) int64 {
	var n int64
	for _, c := range varCols {
		n += int64(p.f.rec.Column(c).(interface{ ValueLen(int) int }).ValueLen(p.i))
	}
	return n
}

// gatherRows builds the record of picks as a slice, by runs or row by row (see Runs), with
// buffers from mem (nil: the default allocator); a slice keeps its input alive until the
// caller releases the record.
//
// REQUIRES: every pick's record has schema.
func gatherRows(mem memory.Allocator, schema *arrow.Schema, picks []pick) arrow.RecordBatch {
	if len(picks) == 0 {
		return copyRows(mem, schema, picks)
	}
	if r := runLen(picks); r == len(picks) {
		lo := picks[0].i
		return picks[0].f.rec.NewSlice(int64(lo), int64(lo+r))
	}
	var runs []pick // the first pick of each run; its length is up to the next run's start
	var lens []int
	for off := 0; off < len(picks); {
		r := runLen(picks[off:])
		runs, lens = append(runs, picks[off]), append(lens, r)
		off += r
		if len(runs)*minBulkRunRows > len(picks) {
			return copyRows(mem, schema, picks) // short runs: row by row is cheaper
		}
	}
	mem = cmp.Or(mem, memory.DefaultAllocator)
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(runs))
	for c := range cols {
		for k, p := range runs {
			parts[k] = array.NewSlice(p.f.rec.Column(c), int64(p.i), int64(p.i+lens[k]))
		}
		a, err := array.Concatenate(parts, mem)
		for _, s := range parts {
			s.Release()
		}
		if err != nil {
			// Concatenate fails only on offsets overflowing int32, a column of over 2 GiB in
			// one chunk, which chunkEnd's byte bound keeps far off. Copy row by row rather
			// than fail the merge.
			return copyRows(mem, schema, picks)
		}
		cols[c] = a
	}
	return array.NewRecordBatch(schema, cols, int64(len(picks)))
}
