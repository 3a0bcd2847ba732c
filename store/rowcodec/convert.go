package rowcodec

import (
	"encoding/base64"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// RowAt converts row i of a stored record (user columns first, in schema order) back into
// a Row, for WAL replay.
func (c *Codec) RowAt(rec arrow.RecordBatch, i int) (Row, error) {
	sch := c.Schema()
	if int(rec.NumCols()) < len(sch.Fields) || i < 0 || i >= int(rec.NumRows()) {
		return Row{}, corruptf("record has %d columns and %d rows; want row %d of %d fields", rec.NumCols(), rec.NumRows(), i, len(sch.Fields))
	}
	key := KeyField(c.Kind())
	row := Row{Values: make([]any, len(sch.Fields))}
	for f, field := range sch.Fields {
		col := rec.Column(f)
		if col.IsNull(i) {
			continue
		}
		var v any
		switch a := col.(type) {
		case *array.String:
			v = a.Value(i)
		case *array.Int64:
			v = a.Value(i)
		case *array.Float64:
			v = a.Value(i)
		case *array.Boolean:
			v = a.Value(i)
		case *array.Binary:
			v = append([]byte(nil), a.Value(i)...)
		case *array.Timestamp:
			unit := a.DataType().(*arrow.TimestampType).Unit
			v = a.Value(i).ToTime(unit).UTC()
		default:
			return Row{}, corruptf("column %q has unsupported type %s", field.Name, col.DataType())
		}
		row.Values[f] = v
		if field.Name == key {
			s, ok := v.(string)
			if !ok {
				return Row{}, corruptf("key column %q is not a string", key)
			}
			row.Key = s
		}
	}
	if row.Key == "" {
		return Row{}, corruptf("row %d has no key", i)
	}
	return row, nil
}

// RowToJSON renders a memtable row like Codec.RowJSON renders a stored one.
func RowToJSON(sch Schema, r Row) map[string]any {
	out := make(map[string]any, len(sch.Fields))
	for i, f := range sch.Fields {
		var v any
		if i < len(r.Values) {
			v = r.Values[i]
		}
		switch x := v.(type) {
		case []byte:
			out[f.Name] = base64.StdEncoding.EncodeToString(x)
		case time.Time:
			out[f.Name] = x.UTC().Format(time.RFC3339Nano)
		default:
			out[f.Name] = x
		}
	}
	return out
}
