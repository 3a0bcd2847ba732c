package rowcodec

import (
	"encoding/base64"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// RowAt converts row i of a stored record back into a Row, for WAL replay.
func (c *Codec) RowAt(rec arrow.RecordBatch, i int) (Row, error) {
	sch := c.schema
	if int(rec.NumCols()) < len(sch.Fields) || i < 0 || i >= int(rec.NumRows()) {
		return Row{}, corruptf("record has %d columns and %d rows; want row %d of %d fields", rec.NumCols(), rec.NumRows(), i, len(sch.Fields))
	}
	row := Row{Values: make([]any, len(sch.Fields))}
	for f, field := range sch.Fields {
		v, ok := goValue(rec.Column(f), i)
		if !ok {
			return Row{}, corruptf("column %q has unsupported type %s", field.Name, rec.Column(f).DataType())
		}
		if b, isBytes := v.([]byte); isBytes {
			v = append([]byte(nil), b...) // the row outlives the record
		}
		row.Values[f] = v
		if f == c.key && v != nil {
			s, ok := v.(string)
			if !ok {
				return Row{}, corruptf("key column %q is not a string", field.Name)
			}
			row.Key = s
		}
	}
	if row.Key == "" {
		return Row{}, corruptf("row %d has no key", i)
	}
	return row, nil
}

// RowJSON converts row i of rec to a JSON-ready map of the user fields (binary as standard
// base64, timestamps as RFC 3339 in UTC, nulls as nil); nil when rec is nil or i out of range.
func (c *Codec) RowJSON(rec arrow.RecordBatch, i int) map[string]any {
	if rec == nil || i < 0 || int64(i) >= rec.NumRows() {
		return nil
	}
	nf := min(len(c.names), int(rec.NumCols()))
	m := make(map[string]any, nf)
	for j := range nf {
		m[c.names[j]] = jsonReady(jsonValue(rec.Column(j), i))
	}
	return m
}

// jsonValue is a[i] as RowJSON shows it, before jsonReady: a column of no field type as Arrow
// marshals it.
func jsonValue(a arrow.Array, i int) any {
	if v, ok := goValue(a, i); ok {
		return v
	}
	return a.GetOneForMarshal(i)
}

// RowToJSON renders a memtable row like Codec.RowJSON renders a stored one.
func RowToJSON(sch Schema, r Row) map[string]any {
	out := make(map[string]any, len(sch.Fields))
	for i, f := range sch.Fields {
		var v any
		if i < len(r.Values) {
			v = r.Values[i]
		}
		out[f.Name] = jsonReady(v)
	}
	return out
}

// goValue is a[i] as a Row value (nil for null; binary aliases the array's memory); false
// for an array of a type no field type maps to.
func goValue(a arrow.Array, i int) (any, bool) {
	if a.IsNull(i) {
		return nil, true
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.Int64:
		return a.Value(i), true
	case *array.Float64:
		return a.Value(i), true
	case *array.Boolean:
		return a.Value(i), true
	case *array.Binary:
		return a.Value(i), true
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC(), true
	}
	return nil, false
}

// jsonReady is a Row value as JSON shows it: binary as standard base64, timestamps as
// RFC 3339 (nanosecond layout) in UTC, everything else as it is.
func jsonReady(v any) any {
	switch x := v.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}
