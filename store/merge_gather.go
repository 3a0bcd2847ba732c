package store

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// copyRows builds one record from picked rows, column by column. Variable-width columns
// reserve their value bytes up front: Reserve counts rows only, and letting the value buffer
// double its way up allocated about twice the output (issue 4).
//
// It copies Arrow values into Arrow builders; Codec.Build (codec side) is its counterpart for
// rows that are not in Arrow form yet, so the two share the per-type shape but no code. The
// per-type loops are written out on purpose: a generic version (type-parameterised array
// and builder) measured about 35% slower on this hot path, since Go's shape stenciling turns
// every Value and Append into a dictionary call.
// mem nil means memory.DefaultAllocator.
func copyRows(mem memory.Allocator, schema *arrow.Schema, picks []pick) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
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
