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

	seqB := array.NewInt64Builder(mem)
	defer seqB.Release()
	seqB.AppendValues(seqs, nil)
	cols = append(cols, seqB.NewArray())

	shardB := array.NewStringBuilder(mem)
	defer shardB.Release()
	shardB.Reserve(n)
	shardB.ReserveData(n * len(shard))
	for range n {
		shardB.Append(shard)
	}
	cols = append(cols, shardB.NewArray())

	delB := array.NewBooleanBuilder(mem)
	defer delB.Release()
	delB.Reserve(n)
	for i := range n {
		delB.UnsafeAppend(isDel(i))
	}
	cols = append(cols, delB.NewArray())

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
				if !c.nullable[j] {
					return invalidf("row %d: field %q: null is not allowed (the field is non-null)", i, c.names[j])
				}
				continue
			}
			if p := checkGoValue(c.types[j], v); p != "" {
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
	// value returns row i's value of column j: its key for the key column (a tombstone's
	// too), else nil for nulls and tombstones.
	value := func(i int) any {
		switch {
		case j == c.key:
			return rows[i].Key
		case isDel(i):
			return nil
		}
		return rows[i].Values[j]
	}
	switch c.types[j] {
	case TypeString:
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(n)
		total := 0
		for i := range rows {
			if s, ok := value(i).(string); ok {
				total += len(s)
			}
		}
		b.ReserveData(total)
		for i := range rows {
			if s, ok := value(i).(string); ok {
				b.Append(s)
			} else {
				b.AppendNull()
			}
		}
		return b.NewArray()
	case TypeBinary:
		b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		defer b.Release()
		b.Reserve(n)
		total := 0
		for i := range rows {
			if v, ok := value(i).([]byte); ok {
				total += len(v)
			}
		}
		b.ReserveData(total)
		for i := range rows {
			if v, ok := value(i).([]byte); ok {
				b.Append(v)
			} else {
				b.AppendNull()
			}
		}
		return b.NewArray()
	case TypeInt64:
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.Reserve(n)
		for i := range rows {
			if v, ok := value(i).(int64); ok {
				b.UnsafeAppend(v)
			} else {
				b.UnsafeAppendBoolToBitmap(false)
			}
		}
		return b.NewArray()
	case TypeFloat64:
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		b.Reserve(n)
		for i := range rows {
			if v, ok := value(i).(float64); ok {
				b.UnsafeAppend(v)
			} else {
				b.UnsafeAppendBoolToBitmap(false)
			}
		}
		return b.NewArray()
	case TypeBool:
		b := array.NewBooleanBuilder(mem)
		defer b.Release()
		b.Reserve(n)
		for i := range rows {
			if v, ok := value(i).(bool); ok {
				b.UnsafeAppend(v)
			} else {
				b.UnsafeAppendBoolToBitmap(false)
			}
		}
		return b.NewArray()
	case TypeTimestamp:
		b := array.NewTimestampBuilder(mem, timestampType)
		defer b.Release()
		b.Reserve(n)
		for i := range rows {
			if v, ok := value(i).(time.Time); ok {
				b.UnsafeAppend(arrow.Timestamp(v.UnixMicro()))
			} else {
				b.UnsafeAppendBoolToBitmap(false)
			}
		}
		return b.NewArray()
	}
	panic("store: unreachable: unknown field type " + string(c.types[j]))
}
