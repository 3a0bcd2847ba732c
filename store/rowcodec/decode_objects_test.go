package rowcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/walkeeper/walkeeper/target"
)

// DecodeObjects is DecodeJSON for objects already decoded by a json.Decoder with UseNumber
// (values string, json.Number, bool, nil, map[string]any, []any): the tests hold DecodeJSON's
// own tokenizer to it, a second decoder built on the standard library. It also accepts Go
// integers and floats where a number is expected (never a float for int64), []byte for binary
// and time.Time for timestamp fields. maxRowBytes (0 = no limit) is compared with the length
// of the object re-encoded by json.Marshal. Errors are as DecodeJSON's; a row naming several
// unknown fields reports the first in sorted order.
func (c *Codec) DecodeObjects(objs []map[string]any, maxRowBytes int) ([]Row, error) {
	rows := make([]Row, 0, len(objs))
	seen := make([]bool, len(c.names))
	for i, obj := range objs {
		if obj == nil {
			return nil, invalidf("row %d: want a JSON object, got null", i)
		}
		if maxRowBytes > 0 {
			b, err := json.Marshal(obj)
			if err != nil {
				return nil, invalidf("row %d: cannot be encoded as JSON: %v", i, err)
			}
			if len(b) > maxRowBytes {
				return nil, invalidf("row %d: %d bytes of JSON, larger than the limit of %d bytes", i, len(b), maxRowBytes)
			}
		}
		clear(seen)
		vals := make([]any, len(c.names))
		matched := 0
		for j, name := range c.names {
			v, ok := obj[name]
			if !ok {
				continue
			}
			matched++
			seen[j] = true
			val, p := c.fromAny(j, v)
			if p != "" {
				return nil, invalidf("row %d: field %q: %s", i, name, p)
			}
			vals[j] = val
		}
		if matched < len(obj) {
			var unknown []string
			for name := range obj {
				if _, ok := c.index[name]; !ok {
					unknown = append(unknown, name)
				}
			}
			slices.Sort(unknown)
			return nil, invalidf("row %d: unknown field %q (the %s schema has %s)", i, target.Clip(unknown[0]), c.kind, c.fieldList())
		}
		row, err := c.finishRow(i, vals, seen)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// fromAny converts a decoded value of field j; on failure it returns a description.
func (c *Codec) fromAny(j int, v any) (any, string) {
	t := c.schema.Fields[j].Type
	if v == nil {
		return nil, ""
	}
	if s, ok := v.(string); ok {
		if !utf8.ValidString(s) {
			return nil, "invalid UTF-8"
		}
		switch t {
		case TypeString:
			return s, ""
		case TypeBinary:
			return parseBinary(s)
		case TypeTimestamp:
			return parseTimestamp(s)
		}
		return nil, wantGot(t, "string")
	}
	switch t {
	case TypeInt64:
		switch x := v.(type) {
		case json.Number:
			return parseInt64(string(x))
		case int, int8, int16, int32, int64, uint8, uint16, uint32:
			return reflect.ValueOf(x).Convert(reflect.TypeFor[int64]()).Int(), ""
		case uint, uint64:
			if u := reflect.ValueOf(x).Uint(); u <= math.MaxInt64 {
				return int64(u), ""
			}
			return nil, fmt.Sprintf("integer %d is out of the int64 range", x)
		case float32, float64:
			return nil, "want int64, got a float (decode JSON with json.Decoder.UseNumber)"
		}
	case TypeFloat64:
		var f float64
		switch x := v.(type) {
		case json.Number:
			return parseFloat64(string(x))
		case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			f = reflect.ValueOf(x).Convert(reflect.TypeFor[float64]()).Float()
		default:
			return nil, wantGot(t, goKind(v))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Sprintf("%v is not a finite number", f)
		}
		return f, ""
	case TypeBool:
		if b, ok := v.(bool); ok {
			return b, ""
		}
	case TypeBinary:
		if b, ok := v.([]byte); ok {
			return bytes.Clone(b), ""
		}
	case TypeTimestamp:
		if ts, ok := v.(time.Time); ok {
			return normTime(ts)
		}
	}
	return nil, wantGot(t, goKind(v))
}

// goKind names the type of a decoded value for error messages.
func goKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "number"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case []byte:
		return "[]byte"
	case time.Time:
		return "time.Time"
	}
	return fmt.Sprintf("unsupported Go type %T", v)
}
