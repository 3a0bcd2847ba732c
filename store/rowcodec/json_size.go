package rowcodec

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// The length of a row's JSON text as the HTTP list pages write it, computed from its values,
// so a listing bounds its bytes before it builds the rows.

// RowJSONBytes is the length of the JSON text of c.RowJSON(rec, i) (0 when that is nil).
func (c *Codec) RowJSONBytes(rec arrow.RecordBatch, i int) int64 {
	if rec == nil || i < 0 || int64(i) >= rec.NumRows() {
		return 0
	}
	nf := min(len(c.names), int(rec.NumCols()))
	n := objectJSONBytes(nf)
	for j := range nf {
		n += stringJSONBytes(c.names[j]) + 1 + valueJSONBytes(jsonValue(rec.Column(j), i))
	}
	return n
}

// RowToJSONBytes is the length of the JSON text of RowToJSON(sch, r).
func RowToJSONBytes(sch Schema, r Row) int64 {
	n := objectJSONBytes(len(sch.Fields))
	for i, f := range sch.Fields {
		var v any
		if i < len(r.Values) {
			v = r.Values[i]
		}
		n += stringJSONBytes(f.Name) + 1 + valueJSONBytes(v)
	}
	return n
}

// objectJSONBytes is the braces and commas of an object of fields members.
func objectJSONBytes(fields int) int64 {
	return 2 + int64(max(fields-1, 0))
}

// valueJSONBytes is the length of the JSON text of jsonReady(v).
func valueJSONBytes(v any) int64 {
	var buf [64]byte
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case string:
		return stringJSONBytes(x)
	case int64:
		return int64(len(strconv.AppendInt(buf[:0], x, 10)))
	case float64:
		return floatJSONBytes(x)
	case []byte:
		return 2 + int64(base64.StdEncoding.EncodedLen(len(x)))
	case time.Time:
		return 2 + int64(len(x.UTC().AppendFormat(buf[:0], time.RFC3339Nano)))
	}
	b, _ := json.Marshal(v) // a column of no field type (RowJSON's fallback)
	return int64(len(b))
}

// floatJSONBytes is the length of f as encoding/json writes a float64: like %g, but with
// the exponent cutoffs of ES6 and an exponent of one digit not padded to two.
func floatJSONBytes(f float64) int64 {
	var buf [32]byte
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	n := len(b)
	if format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		n--
	}
	return int64(n)
}

// stringJSONBytes is the length of s as encoding/json writes a string without HTML escaping.
func stringJSONBytes(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += int64(size)
		}
		i += size
	}
	return n
}
