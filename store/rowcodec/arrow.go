package rowcodec

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/target"
)

// Row → Arrow: Build and its per-type column builders.

// Build makes one record with ArrowSchema from rows: seqs[i] is row i's write sequence, shard
// the writing shard and deleted[i] (nil = none) marks tombstones, which need only Key. Live
// rows must hold one value per field of its Go type (as DecodeJSON produces) with the key
// equal to Key, else ErrInvalidInput naming row and field, and nothing is built. mem nil means
// memory.DefaultAllocator; the caller releases the record.
func (c *Codec) Build(mem memory.Allocator, rows []Row, seqs []int64, shard string, deleted []bool) (arrow.RecordBatch, error) {
	mem = cmp.Or(mem, memory.DefaultAllocator)
	n := len(rows)
	if len(seqs) != n {
		return nil, invalidf("build: %d rows but %d sequences", n, len(seqs))
	}
	if deleted != nil && len(deleted) != n {
		return nil, invalidf("build: %d rows but %d deleted flags", n, len(deleted))
	}
	isDel := func(i int) bool { return deleted != nil && deleted[i] }
	if err := c.checkRows(rows, isDel); err != nil {
		return nil, err
	}

	nf := len(c.names)
	cols := make([]arrow.Array, 0, nf+3)
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	for j := 0; j < nf; j++ {
		cols = append(cols, c.buildColumn(mem, j, rows, isDel))
	}
	cols = append(cols,
		buildFixedWidth(array.NewInt64Builder(mem), n,
			func(i int) (int64, bool) { return seqs[i], true }),
		buildVarWidth(array.NewStringBuilder(mem), n,
			func(int) (string, bool) { return shard, true }),
		buildFixedWidth(array.NewBooleanBuilder(mem), n,
			func(i int) (bool, bool) { return isDel(i), true }),
	)
	return array.NewRecordBatch(c.arrow, cols, int64(n)), nil
}

// checkRows validates rows for Build so that building cannot fail half way.
func (c *Codec) checkRows(rows []Row, isDel func(int) bool) error {
	nf := len(c.names)
	for i, r := range rows {
		if r.Key == "" {
			return invalidf("row %d: field %q: the key must not be empty", i, c.names[c.key])
		}
		if isDel(i) {
			continue
		}
		if len(r.Values) != nf {
			return invalidf("row %d: want %d values (one per field), got %d", i, nf, len(r.Values))
		}
		for j, v := range r.Values {
			if v == nil {
				if !c.schema.Fields[j].Nullable {
					return invalidf("row %d: field %q: null is not allowed (the field is non-null)", i, c.names[j])
				}
				continue
			}
			if p := checkGoValue(c.schema.Fields[j].Type, v); p != "" {
				return invalidf("row %d: field %q: %s", i, c.names[j], p)
			}
		}
		if k, _ := r.Values[c.key].(string); k != r.Key {
			return invalidf("row %d: field %q is %q but the row key is %q", i, c.names[c.key], target.Clip(k), target.Clip(r.Key))
		}
	}
	return nil
}

// checkGoValue checks that a non-nil Row value has the Go type of field type t.
func checkGoValue(t FieldType, v any) string {
	ok := false
	switch t {
	case TypeString:
		_, ok = v.(string)
	case TypeInt64:
		_, ok = v.(int64)
	case TypeFloat64:
		var f float64
		if f, ok = v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return fmt.Sprintf("%v is not a finite number", f)
		}
	case TypeBool:
		_, ok = v.(bool)
	case TypeBinary:
		_, ok = v.([]byte)
	case TypeTimestamp:
		var ts time.Time
		if ts, ok = v.(time.Time); ok {
			if y := ts.UTC().Year(); y < 0 || y > 9999 {
				return "timestamp is outside the years 0000-9999 in UTC"
			}
		}
	}
	if !ok {
		return fmt.Sprintf("want Go value of type %s, got %T", t, v)
	}
	return ""
}

// buildColumn builds user column j; rows have been checked by checkRows.
func (c *Codec) buildColumn(mem memory.Allocator, j int, rows []Row, isDel func(int) bool) arrow.Array {
	n := len(rows)
	if j == c.key { // a string column holding every row's key, a tombstone's too
		return buildVarWidth(array.NewStringBuilder(mem), n,
			func(i int) (string, bool) { return rows[i].Key, true })
	}
	switch c.schema.Fields[j].Type {
	case TypeString:
		return buildVarWidth(array.NewStringBuilder(mem), n, userValue[string](rows, j, isDel))
	case TypeBinary:
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		return buildVarWidth(b, n, userValue[[]byte](rows, j, isDel))
	case TypeInt64:
		return buildFixedWidth(array.NewInt64Builder(mem), n, userValue[int64](rows, j, isDel))
	case TypeFloat64:
		return buildFixedWidth(array.NewFloat64Builder(mem), n, userValue[float64](rows, j, isDel))
	case TypeBool:
		return buildFixedWidth(array.NewBooleanBuilder(mem), n, userValue[bool](rows, j, isDel))
	case TypeTimestamp:
		b := array.NewTimestampBuilder(mem, timestampType)
		ts := userValue[time.Time](rows, j, isDel)
		return buildFixedWidth(b, n, func(i int) (arrow.Timestamp, bool) {
			t, ok := ts(i)
			return arrow.Timestamp(t.UnixMicro()), ok
		})
	}
	panic("store: unreachable: unknown field type " + string(c.schema.Fields[j].Type))
}

// userValue returns row i's value of user column j as a V; false for nulls and tombstones.
func userValue[V any](rows []Row, j int, isDel func(int) bool) func(int) (V, bool) {
	return func(i int) (V, bool) {
		if isDel(i) {
			var zero V
			return zero, false
		}
		v, ok := rows[i].Values[j].(V)
		return v, ok
	}
}

// fixedWidthBuilder is an Arrow builder of fixed-width values of Go type V.
type fixedWidthBuilder[V any] interface {
	array.Builder
	UnsafeAppend(V)
}

// buildFixedWidth appends get(i) for i in [0, n) to b (a null where get says false), reserving
// room once, and returns the array, releasing b.
func buildFixedWidth[V any](b fixedWidthBuilder[V], n int, get func(int) (V, bool)) arrow.Array {
	defer b.Release()
	b.Reserve(n)
	for i := range n {
		if v, ok := get(i); ok {
			b.UnsafeAppend(v)
		} else {
			b.UnsafeAppendBoolToBitmap(false)
		}
	}
	return b.NewArray()
}

// varWidthBuilder is an Arrow builder of strings or byte slices.
type varWidthBuilder[V string | []byte] interface {
	array.Builder
	ReserveData(int)
	Append(V)
}

// buildVarWidth is buildFixedWidth for variable-width values, reserving their bytes once too.
func buildVarWidth[V string | []byte](b varWidthBuilder[V], n int,
	get func(int) (V, bool)) arrow.Array {
	defer b.Release()
	b.Reserve(n)
	total := 0
	for i := range n {
		if v, ok := get(i); ok {
			total += len(v)
		}
	}
	b.ReserveData(total)
	for i := range n {
		if v, ok := get(i); ok {
			b.Append(v)
		} else {
			b.AppendNull()
		}
	}
	return b.NewArray()
}
