package rowcodec

import (
	"github.com/walkeeper/walkeeper/internal/jsonscan"
	"github.com/walkeeper/walkeeper/target"
)

// MeasureJSON counts the rows of body and bounds their decoded size from above without
// materialising them, calling check with the totals after every row and stopping at its
// first error; a body of another shape is left for decoding to refuse.
//
// REQUIRES: json.Valid(body).
func (c *Codec) MeasureJSON(body []byte, check func(rows int, size int64) error) (rows int, size int64, err error) {
	i := jsonscan.SkipWS(body, 0)
	if i >= len(body) || body[i] != '[' {
		return 0, 0, nil
	}
	perRow := rowHeaderBytes + int64(len(c.names))*valueSlotBytes
	if c.kind == target.KindDatagen {
		perRow += 16 + 36 // a derived event_id (a UUID string)
	}
	err = jsonscan.SplitArray(body[i:], func(raw []byte) error {
		size += perRow
		if raw[0] == '{' {
			_ = jsonscan.SplitObject(raw, func(key, v []byte) error {
				if j, ok := c.lookup(key); ok {
					size += rawValueBytes(c.schema.Fields[j].Type, v)
				}
				return nil
			})
		}
		rows++
		return check(rows, size)
	})
	return rows, size, err
}

// rawValueBytes bounds what the decoded value of a field of type t, given as the raw JSON
// value v, adds to DecodedValuesBytes: unquoting and base64 only shrink text.
func rawValueBytes(t FieldType, v []byte) int64 {
	if len(v) == 0 || v[0] == 'n' {
		return 0
	}
	switch t {
	case TypeString:
		return 16 + int64(len(v))
	case TypeBinary:
		return 24 + int64(len(v))
	case TypeTimestamp:
		return 24
	case TypeBool:
		return 0
	}
	return 8
}
