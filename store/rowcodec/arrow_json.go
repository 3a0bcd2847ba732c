package rowcodec

import (
	"encoding/base64"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Arrow → JSON: a stored row as a JSON-ready map.

// RowJSON converts row i of rec (a record with ArrowSchema) to a JSON-ready map of the user
// fields: strings, int64, float64 and bool as they are, binary as a standard base64 string,
// timestamps as RFC 3339 (nanosecond layout) strings in UTC, nulls as nil. It returns nil when
// rec is nil or i is out of range.
func (c *Codec) RowJSON(rec arrow.RecordBatch, i int) map[string]any {
	if rec == nil || i < 0 || int64(i) >= rec.NumRows() {
		return nil
	}
	nf := min(len(c.names), int(rec.NumCols()))
	m := make(map[string]any, nf)
	for j := 0; j < nf; j++ {
		m[c.names[j]] = jsonValue(rec.Column(j), i)
	}
	return m
}

// jsonValue is the JSON-ready value of a[i].
func jsonValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano)
	}
	return a.GetOneForMarshal(i)
}

// CheckRecord verifies that rec has exactly ArrowSchema (field names, types, nullability; a
// walkeeper.kind metadata entry, when present, must name this kind), that its columns match,
// and that the key and system columns hold no nulls. Anything else is ErrCorrupt.
