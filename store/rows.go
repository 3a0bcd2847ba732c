package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// System columns appended to every stored record, in this order after the user fields. They
// are non-null in the Arrow schema.
const (
	ColSeq     = "_seq"     // int64: the row's write sequence; newest wins
	ColShard   = "_shard"   // string: the shard that wrote the row; breaks sequence ties
	ColDeleted = "_deleted" // bool: the row is a tombstone
)

// MetadataKind is the Arrow schema metadata key holding the store kind of a record.
const MetadataKind = "walkeeper.kind"

// datagenNS is the UUID namespace of derived datagen event ids.
var datagenNS = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://walkeeper.dev/datagen"))

// DatagenEventID is the event_id of a datagen row:
// uuid.NewSHA1(datagenNS, item_id + "\x00" + checkpoint + "\x00" + decimal ordinal). A retried
// append of the same item, checkpoint and ordinal therefore lands on the same key.
func DatagenEventID(itemID, checkpoint string, ordinal int64) string {
	name := make([]byte, 0, len(itemID)+len(checkpoint)+22)
	name = append(name, itemID...)
	name = append(name, 0)
	name = append(name, checkpoint...)
	name = append(name, 0)
	name = strconv.AppendInt(name, ordinal, 10)
	return uuid.NewSHA1(datagenNS, name).String()
}

// Row is one validated row: Values aligned with Schema.Fields, holding string, int64,
// float64, bool, []byte, time.Time (UTC, microsecond precision) or nil for null. Key repeats
// the key field's value. A tombstone (see Codec.Build) needs only Key.
type Row struct {
	Key    string
	Values []any
}

// Codec converts rows of one store between JSON, Row and Arrow. It is immutable and safe for
// concurrent use.
type Codec struct {
	kind     Kind
	schema   Schema
	names    []string
	types    []FieldType
	nullable []bool
	index    map[string]int
	key      int
	arrow    *arrow.Schema

	// datagen only: the fields the event id is derived from.
	itemIdx, checkpointIdx, ordinalIdx int
}

// NewCodec returns the codec of a store of kind k with schema s. s is checked with
// ValidateSchema; for rollout and datagen an empty s means the fixed schema.
func NewCodec(k Kind, s Schema) (*Codec, error) {
	if _, err := ParseKind(string(k)); err != nil {
		return nil, err
	}
	if (k == KindRollout || k == KindDatagen) && len(s.Fields) == 0 {
		s = fixedSchema(k)
	}
	if err := ValidateSchema(k, s); err != nil {
		return nil, err
	}
	s = s.clone()
	n := len(s.Fields)
	c := &Codec{
		kind:     k,
		schema:   s,
		names:    make([]string, n),
		types:    make([]FieldType, n),
		nullable: make([]bool, n),
		index:    make(map[string]int, n),
	}
	fields := make([]arrow.Field, 0, n+3)
	for i, f := range s.Fields {
		c.names[i], c.types[i], c.nullable[i] = f.Name, f.Type, f.Nullable
		c.index[f.Name] = i
		// Every user column is nullable in Arrow: tombstones carry only the key.
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type.ArrowType(), Nullable: true})
	}
	fields = append(fields,
		arrow.Field{Name: ColSeq, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColShard, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColDeleted, Type: arrow.FixedWidthTypes.Boolean},
	)
	md := arrow.NewMetadata([]string{MetadataKind}, []string{string(k)})
	c.arrow = arrow.NewSchema(fields, &md)
	c.key = c.index[KeyField(k)]
	if k == KindDatagen {
		c.itemIdx, c.checkpointIdx, c.ordinalIdx = c.index["item_id"], c.index["checkpoint"], c.index["ordinal"]
	}
	return c, nil
}

// Kind returns the store kind.
func (c *Codec) Kind() Kind { return c.kind }

// Schema returns a copy of the user schema.
func (c *Codec) Schema() Schema { return c.schema.clone() }

// ArrowSchema returns the schema of stored records: the user fields (all nullable) followed by
// _seq, _shard and _deleted (non-null), with metadata {"walkeeper.kind": kind}. It is shared;
// Arrow schemas are immutable.
func (c *Codec) ArrowSchema() *arrow.Schema { return c.arrow }

// KeyIndex returns the index of the key column in ArrowSchema (and in Schema().Fields).
func (c *Codec) KeyIndex() int { return c.key }

// ---------------------------------------------------------------------------------------------
// JSON → Row

// DecodeJSON parses a JSON array of row objects into validated rows. Every problem is an error
// wrapping ErrInvalidInput that names the row index and, where there is one, the field: a body
// that is not one JSON array (or has data after it), an element that is not an object, a row
// whose raw JSON object is longer than maxRowBytes (0 = no limit), an unknown field, a field
// given twice in one object, a missing or null non-null field, a null, missing or empty key, a
// value of the wrong JSON type (nested objects and arrays are never values), an int64 that is
// not a JSON integer or overflows, a float64 out of range, invalid base64 or RFC 3339 text,
// invalid UTF-8 or a lone UTF-16 surrogate escape in any string. Datagen: a missing or null
// event_id is derived (DatagenEventID); a given one must equal the derived one. An empty array
// gives an empty, non-nil slice. Timestamps are converted to UTC and truncated to microseconds
// (the stored precision). Nothing is returned with an error: a body is taken whole or not at all.
func (c *Codec) DecodeJSON(body []byte, maxRowBytes int) ([]Row, error) {
	if !json.Valid(body) {
		// Slow path, only to say precisely where and what is wrong.
		return c.decodeJSONInvalid(body, maxRowBytes)
	}
	// Fast path: body is one syntactically valid JSON value, so it can be split by hand
	// (scanValue and splitObject rely on that; they still never index out of bounds).
	i := skipWS(body, 0)
	if body[i] != '[' {
		return nil, invalidf("body is not a JSON array of row objects (it is a JSON %s)", rawKind(body[i:]))
	}
	rows := make([]Row, 0)
	seen := make([]bool, len(c.names))
	i = skipWS(body, i+1)
	for n := 0; i < len(body) && body[i] != ']'; n++ {
		end := scanValue(body, i)
		row, err := c.decodeRawRow(n, body[i:end], maxRowBytes, seen)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		i = skipWS(body, end)
		if i < len(body) && body[i] == ',' {
			i = skipWS(body, i+1)
		}
	}
	return rows, nil
}

// decodeJSONInvalid decodes a body that is not valid JSON with encoding/json's Decoder, row
// by row as json.RawMessage, to report the first problem with its row index.
func (c *Codec) decodeJSONInvalid(body []byte, maxRowBytes int) ([]Row, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, invalidf("body is empty; want a JSON array of row objects")
	}
	if err != nil {
		return nil, invalidf("body is not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, invalidf("body is not a JSON array of row objects (it starts with %s)", tokenKind(tok))
	}
	seen := make([]bool, len(c.names))
	n := 0
	for ; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, invalidf("row %d: invalid JSON: %v", n, err)
		}
		if _, err := c.decodeRawRow(n, raw, maxRowBytes, seen); err != nil {
			return nil, err
		}
	}
	where := "at the start of the row array"
	if n > 0 {
		where = fmt.Sprintf("after row %d", n-1)
	}
	tok, err = dec.Token()
	if err == io.EOF {
		return nil, invalidf("body: JSON array is not terminated (missing ']' %s)", where)
	}
	if err != nil {
		return nil, invalidf("body: invalid JSON %s: %v", where, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != ']' {
		return nil, invalidf("body: invalid JSON %s", where)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalidf("body: unexpected data after the closing ']' of the row array")
	}
	return nil, invalidf("body is not valid JSON")
}

// decodeRawRow decodes row i from its raw JSON text, which must be one valid JSON value.
// seen is scratch space of len(fields).
func (c *Codec) decodeRawRow(i int, raw []byte, maxRowBytes int, seen []bool) (Row, error) {
	if maxRowBytes > 0 && len(raw) > maxRowBytes {
		return Row{}, invalidf("row %d: %d bytes of JSON, larger than the limit of %d bytes", i, len(raw), maxRowBytes)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Row{}, invalidf("row %d: want a JSON object, got %s", i, rawKind(raw))
	}
	// encoding/json silently replaces invalid UTF-8 and lone surrogate escapes with U+FFFD;
	// refuse them instead of storing something else than was sent. Check the whole row once,
	// and only on failure look for the field to blame.
	textOK := textProblem(raw) == ""
	clear(seen)
	vals := make([]any, len(c.names))
	err := splitObject(raw, func(key, v []byte) error {
		if !textOK {
			if p := textProblem(v); p != "" {
				return invalidf("row %d: field %q: %s", i, clip(keyString(key)), p)
			}
			if p := textProblem(key); p != "" {
				return invalidf("row %d: field name %q: %s", i, clip(keyString(key)), p)
			}
		}
		j, ok := c.lookup(key)
		if !ok {
			return invalidf("row %d: unknown field %q (the %s schema has %s)", i, clip(keyString(key)), c.kind, c.fieldList())
		}
		if seen[j] {
			return invalidf("row %d: field %q: given more than once in one object", i, c.names[j])
		}
		seen[j] = true
		val, p := c.fromRaw(j, v)
		if p != "" {
			return invalidf("row %d: field %q: %s", i, c.names[j], p)
		}
		vals[j] = val
		return nil
	})
	if m, ok := err.(malformedError); ok {
		return Row{}, invalidf("row %d: %s", i, m)
	}
	if err != nil {
		return Row{}, err
	}
	return c.finishRow(i, vals, seen)
}

// malformedError is what splitObject returns for text that is not a JSON object, which cannot
// happen for input that passed json.Valid; decodeRawRow turns it into ErrInvalidInput.
type malformedError string

func (e malformedError) Error() string { return string(e) }

// lookup finds the field named by a raw JSON string (with quotes).
func (c *Codec) lookup(key []byte) (int, bool) {
	if len(key) >= 2 && bytes.IndexByte(key, '\\') < 0 {
		j, ok := c.index[string(key[1:len(key)-1])] // no allocation
		return j, ok
	}
	j, ok := c.index[keyString(key)]
	return j, ok
}

// keyString decodes a raw JSON string (with quotes), for lookups and messages.
func keyString(key []byte) string {
	s, _ := unquote(key)
	str, _ := s.(string)
	return str
}

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just after the JSON string starting at b[i] == '"'.
func scanString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// scanValue returns the index just after the valid JSON value starting at b[i]. On invalid
// input it returns some index in (i, len(b)], never panicking.
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = scanString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i + 1
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// splitObject calls fn with the raw key (quoted) and raw value of each member of the valid
// JSON object raw, in order, stopping at the first error fn returns.
func splitObject(raw []byte, fn func(key, val []byte) error) error {
	const malformed = malformedError("malformed JSON object")
	i := skipWS(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return malformed
		}
		kEnd := scanString(raw, i)
		key := raw[i:kEnd]
		i = skipWS(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return malformed
		}
		i = skipWS(raw, i+1)
		vEnd := scanValue(raw, i)
		if err := fn(key, raw[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(raw, vEnd)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case '}':
			return nil
		case ',':
			i = skipWS(raw, i+1)
		default:
			return malformed
		}
	}
	return malformed
}

// fromRaw converts the raw JSON value of field j; on failure it returns a description.
func (c *Codec) fromRaw(j int, raw []byte) (any, string) {
	t := c.types[j]
	if len(raw) == 0 {
		return nil, "empty value"
	}
	switch raw[0] {
	case 'n':
		return nil, ""
	case '{', '[':
		return nil, wantGot(t, rawKind(raw))
	}
	switch t {
	case TypeString:
		if raw[0] != '"' {
			return nil, wantGot(t, rawKind(raw))
		}
		return unquote(raw)
	case TypeInt64:
		if !isNumberStart(raw[0]) {
			return nil, wantGot(t, rawKind(raw))
		}
		return parseInt64(string(raw))
	case TypeFloat64:
		if !isNumberStart(raw[0]) {
			return nil, wantGot(t, rawKind(raw))
		}
		return parseFloat64(string(raw))
	case TypeBool:
		switch string(raw) {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, wantGot(t, rawKind(raw))
	case TypeBinary, TypeTimestamp:
		if raw[0] != '"' {
			return nil, wantGot(t, rawKind(raw))
		}
		s, p := unquote(raw)
		if p != "" {
			return nil, p
		}
		if t == TypeBinary {
			return parseBinary(s.(string))
		}
		return parseTimestamp(s.(string))
	}
	return nil, fmt.Sprintf("unsupported field type %q", t)
}

// DecodeObjects is DecodeJSON for objects already decoded by a json.Decoder with UseNumber
// (values string, json.Number, bool, nil, map[string]any, []any). For Go callers it also
// accepts Go integers and floats where a number is expected (never a float for int64),
// []byte for binary and time.Time for timestamp fields. maxRowBytes (0 = no limit) is compared
// with the length of the object re-encoded by json.Marshal. Errors are as DecodeJSON's; a row
// naming several unknown fields reports the first in sorted order.
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
			return nil, invalidf("row %d: unknown field %q (the %s schema has %s)", i, clip(unknown[0]), c.kind, c.fieldList())
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
	t := c.types[j]
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
		case int:
			return int64(x), ""
		case int8:
			return int64(x), ""
		case int16:
			return int64(x), ""
		case int32:
			return int64(x), ""
		case int64:
			return x, ""
		case uint:
			return uintToInt64(uint64(x))
		case uint8:
			return int64(x), ""
		case uint16:
			return int64(x), ""
		case uint32:
			return int64(x), ""
		case uint64:
			return uintToInt64(x)
		case float32, float64:
			return nil, "want int64, got a float (decode JSON with json.Decoder.UseNumber)"
		}
	case TypeFloat64:
		var f float64
		switch x := v.(type) {
		case json.Number:
			return parseFloat64(string(x))
		case float64:
			f = x
		case float32:
			f = float64(x)
		case int:
			f = float64(x)
		case int8:
			f = float64(x)
		case int16:
			f = float64(x)
		case int32:
			f = float64(x)
		case int64:
			f = float64(x)
		case uint:
			f = float64(x)
		case uint8:
			f = float64(x)
		case uint16:
			f = float64(x)
		case uint32:
			f = float64(x)
		case uint64:
			f = float64(x)
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

// finishRow checks presence and nullability, derives the datagen event id and the key.
func (c *Codec) finishRow(i int, vals []any, seen []bool) (Row, error) {
	for j, v := range vals {
		if v != nil || c.nullable[j] || c.kind == KindDatagen && j == c.key {
			continue
		}
		if seen[j] {
			return Row{}, invalidf("row %d: field %q: null is not allowed (the field is non-null)", i, c.names[j])
		}
		return Row{}, invalidf("row %d: field %q: missing (the field is non-null)", i, c.names[j])
	}
	if c.kind == KindDatagen {
		item, _ := vals[c.itemIdx].(string)
		checkpoint, _ := vals[c.checkpointIdx].(string)
		ordinal, _ := vals[c.ordinalIdx].(int64)
		if strings.IndexByte(item, 0) >= 0 {
			return Row{}, invalidf("row %d: field %q: NUL bytes are not allowed (they separate the parts of the derived event_id)", i, "item_id")
		}
		if strings.IndexByte(checkpoint, 0) >= 0 {
			return Row{}, invalidf("row %d: field %q: NUL bytes are not allowed (they separate the parts of the derived event_id)", i, "checkpoint")
		}
		derived := DatagenEventID(item, checkpoint, ordinal)
		if vals[c.key] == nil {
			vals[c.key] = derived
		} else if given, _ := vals[c.key].(string); given != derived {
			return Row{}, invalidf("row %d: field %q: %q does not match the id derived from item_id, checkpoint and ordinal (%s); leave event_id out to have it derived", i, "event_id", clip(given), derived)
		}
	}
	key, _ := vals[c.key].(string)
	if key == "" {
		return Row{}, invalidf("row %d: field %q: the key must not be empty", i, c.names[c.key])
	}
	return Row{Key: key, Values: vals}, nil
}

func (c *Codec) fieldList() string {
	const shown = 12
	var b strings.Builder
	for j, name := range c.names {
		if j == shown {
			fmt.Fprintf(&b, ", ... (%d fields)", len(c.names))
			break
		}
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}

// ---------------------------------------------------------------------------------------------
// value parsing shared by DecodeJSON and DecodeObjects

func wantGot(t FieldType, got string) string { return fmt.Sprintf("want %s, got %s", t, got) }

func isNumberStart(b byte) bool { return b == '-' || b >= '0' && b <= '9' }

// parseInt64 accepts a JSON integer (no fraction, no exponent) within the int64 range.
func parseInt64(s string) (any, string) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return n, ""
	}
	if errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Sprintf("integer %s is out of the int64 range", clip(s))
	}
	if _, ferr := strconv.ParseFloat(s, 64); ferr == nil || errors.Is(ferr, strconv.ErrRange) {
		return nil, fmt.Sprintf("want int64, got non-integer number %s", clip(s))
	}
	return nil, fmt.Sprintf("want int64, got %q", clip(s))
}

// parseFloat64 accepts any finite JSON number.
func parseFloat64(s string) (any, string) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Sprintf("number %s is out of the float64 range", clip(s))
		}
		return nil, fmt.Sprintf("want float64, got %q", clip(s))
	}
	return f, ""
}

func uintToInt64(u uint64) (any, string) {
	if u > math.MaxInt64 {
		return nil, fmt.Sprintf("integer %d is out of the int64 range", u)
	}
	return int64(u), ""
}

// binaryEncoding is standard base64 with padding; Strict refuses non-canonical trailing bits.
var binaryEncoding = base64.StdEncoding.Strict()

func parseBinary(s string) (any, string) {
	b, err := binaryEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Sprintf("invalid standard base64: %v", err)
	}
	return b, ""
}

func parseTimestamp(s string) (any, string) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Sprintf("want an RFC 3339 timestamp such as \"2006-01-02T15:04:05Z\", got %q", clip(s))
	}
	return normTime(t)
}

// normTime converts t to UTC at microsecond precision (the stored form) and keeps it within
// the years RFC 3339 can write.
func normTime(t time.Time) (any, string) {
	u := t.UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return nil, fmt.Sprintf("timestamp %s is outside the years 0000-9999 in UTC", u.Format(time.RFC3339Nano))
	}
	return time.UnixMicro(u.UnixMicro()).UTC(), ""
}

// unquote decodes a raw JSON string.
func unquote(raw []byte) (any, string) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Sprintf("invalid JSON string: %v", err)
	}
	return s, ""
}

// textProblem reports invalid UTF-8 or a \u escape that is a lone UTF-16 surrogate in raw,
// valid JSON text (where a backslash occurs only inside strings, always starting an escape).
// It returns "" when b is fine.
func textProblem(b []byte) string {
	if !utf8.Valid(b) {
		return "invalid UTF-8"
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 < len(b) && b[i+1] == 'u' {
			r, ok := hex4(b, i+2)
			switch {
			case !ok:
			case utf16IsHigh(r):
				r2, ok2 := rune(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					r2, ok2 = hex4(b, i+8)
				}
				if !ok2 || !utf16IsLow(r2) {
					return fmt.Sprintf("a lone UTF-16 surrogate escape \\u%04x", r)
				}
				i += 6
			case utf16IsLow(r):
				return fmt.Sprintf("a lone UTF-16 surrogate escape \\u%04x", r)
			}
		}
		i++ // skip the escaped character
	}
	return ""
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func utf16IsHigh(r rune) bool { return r >= 0xD800 && r < 0xDC00 }
func utf16IsLow(r rune) bool  { return r >= 0xDC00 && r < 0xE000 }

// rawKind names the JSON type of a raw value for error messages.
func rawKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number " + clip(string(raw))
}

// tokenKind names the JSON type of a json.Decoder token.
func tokenKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
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

// ---------------------------------------------------------------------------------------------
// Row → Arrow

// Build makes one record with ArrowSchema from rows: seqs[i] is row i's write sequence, shard
// the writing shard and deleted[i] (nil = none) marks tombstones, which need only Key; their
// other values are written as nulls whatever Values holds. Live rows must have one value per
// field of the Go type the field maps to (as DecodeJSON produces), non-null fields non-nil,
// and the key field equal to Key. Every violation is ErrInvalidInput naming the row and field;
// nothing is built then. mem nil means memory.DefaultAllocator. The caller releases the record.
func (c *Codec) Build(mem memory.Allocator, rows []Row, seqs []int64, shard string, deleted []bool) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
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
			return invalidf("row %d: field %q is %q but the row key is %q", i, c.names[c.key], clip(k), clip(r.Key))
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
	// value returns row i's value of column j, nil for nulls and tombstones (but the key).
	value := func(i int) any {
		if isDel(i) {
			return nil
		}
		return rows[i].Values[j]
	}
	switch c.types[j] {
	case TypeString:
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(n)
		if j == c.key {
			total := 0
			for i := range rows {
				total += len(rows[i].Key)
			}
			b.ReserveData(total)
			for i := range rows {
				b.Append(rows[i].Key)
			}
			return b.NewArray()
		}
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

// ---------------------------------------------------------------------------------------------
// Arrow → JSON, and checks

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
func (c *Codec) CheckRecord(rec arrow.RecordBatch) error {
	if rec == nil {
		return corruptf("record is nil")
	}
	sc := rec.Schema()
	if sc == nil {
		return corruptf("record has no schema")
	}
	if !sc.Equal(c.arrow) {
		return corruptf("record schema does not match the %s store schema: %s", c.kind, arrowDiff(c.arrow, sc))
	}
	if k, ok := sc.Metadata().GetValue(MetadataKind); ok && k != string(c.kind) {
		return corruptf("record is of kind %q, want %q", clip(k), c.kind)
	}
	if int(rec.NumCols()) != sc.NumFields() {
		return corruptf("record has %d columns for %d schema fields", rec.NumCols(), sc.NumFields())
	}
	rows := rec.NumRows()
	for j, col := range rec.Columns() {
		f := sc.Field(j)
		if col == nil || int64(col.Len()) != rows || !arrow.TypeEqual(col.DataType(), f.Type) {
			return corruptf("record column %d %q does not match its schema field", j, f.Name)
		}
		if !f.Nullable && col.NullN() != 0 {
			return corruptf("record column %q has %d nulls in a non-null column", f.Name, col.NullN())
		}
	}
	if n := rec.Column(c.key).NullN(); n != 0 {
		return corruptf("record key column %q has %d nulls", c.names[c.key], n)
	}
	return nil
}

// arrowDiff describes the first difference between two Arrow schemas.
func arrowDiff(want, got *arrow.Schema) string {
	wf, gf := want.Fields(), got.Fields()
	for j := 0; j < len(wf) && j < len(gf); j++ {
		if !wf[j].Equal(gf[j]) {
			return fmt.Sprintf("column %d: want %s, got %s", j, wf[j], gf[j])
		}
	}
	return fmt.Sprintf("want %d columns, got %d", len(wf), len(gf))
}

// KeyAt returns the key of row i of rec (a record with ArrowSchema), or "" if rec does not
// have the expected key column. For loops, use View.
func (c *Codec) KeyAt(rec arrow.RecordBatch, i int) string {
	if a, ok := column(rec, c.key, i).(*array.String); ok && a.IsValid(i) {
		return a.Value(i)
	}
	return ""
}

// SeqAt returns the _seq of row i of rec, or 0 if rec does not have the expected column.
func (c *Codec) SeqAt(rec arrow.RecordBatch, i int) int64 {
	if a, ok := column(rec, len(c.names), i).(*array.Int64); ok {
		return a.Value(i)
	}
	return 0
}

// ShardAt returns the _shard of row i of rec, or "" if rec does not have the expected column.
func (c *Codec) ShardAt(rec arrow.RecordBatch, i int) string {
	if a, ok := column(rec, len(c.names)+1, i).(*array.String); ok {
		return a.Value(i)
	}
	return ""
}

// DeletedAt returns the _deleted flag of row i of rec, or false if rec does not have the
// expected column.
func (c *Codec) DeletedAt(rec arrow.RecordBatch, i int) bool {
	if a, ok := column(rec, len(c.names)+2, i).(*array.Boolean); ok {
		return a.Value(i)
	}
	return false
}

// column returns column j of rec if it exists and has row i, else nil.
func column(rec arrow.RecordBatch, j, i int) arrow.Array {
	if rec == nil || j < 0 || int64(j) >= rec.NumCols() || i < 0 || int64(i) >= rec.NumRows() {
		return nil
	}
	a := rec.Column(j)
	if a == nil || i >= a.Len() {
		return nil
	}
	return a
}

// RecordView gives typed, allocation-free access to the key and system columns of one record:
// the hot path of merges and reads. It does not retain the record; keep it alive while the
// view is used. Indexes out of range panic like slice indexes.
type RecordView struct {
	rec     arrow.RecordBatch
	key     *array.String
	seq     *array.Int64
	shard   *array.String
	deleted *array.Boolean
}

// View type-asserts the key, _seq, _shard and _deleted columns of rec once, finding them by
// name (so a record projected to just those columns works too). Missing, duplicated or
// mistyped columns, columns of the wrong length and nulls in them are ErrCorrupt.
func (c *Codec) View(rec arrow.RecordBatch) (RecordView, error) {
	if rec == nil || rec.Schema() == nil {
		return RecordView{}, corruptf("record is nil")
	}
	v := RecordView{rec: rec}
	var err error
	if v.key, err = viewColumn[*array.String](rec, c.names[c.key]); err != nil {
		return RecordView{}, err
	}
	if v.seq, err = viewColumn[*array.Int64](rec, ColSeq); err != nil {
		return RecordView{}, err
	}
	if v.shard, err = viewColumn[*array.String](rec, ColShard); err != nil {
		return RecordView{}, err
	}
	if v.deleted, err = viewColumn[*array.Boolean](rec, ColDeleted); err != nil {
		return RecordView{}, err
	}
	return v, nil
}

func viewColumn[T arrow.Array](rec arrow.RecordBatch, name string) (T, error) {
	var zero T
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, corruptf("record has %d columns named %q, want 1", len(idx), name)
	}
	if int64(idx[0]) >= rec.NumCols() {
		return zero, corruptf("record column %q is missing", name)
	}
	col := rec.Column(idx[0])
	a, ok := col.(T)
	if !ok {
		return zero, corruptf("record column %q has type %s", name, col.DataType())
	}
	if int64(a.Len()) != rec.NumRows() {
		return zero, corruptf("record column %q has %d rows, the record %d", name, a.Len(), rec.NumRows())
	}
	if a.NullN() != 0 {
		return zero, corruptf("record column %q has %d nulls", name, a.NullN())
	}
	return a, nil
}

// Record returns the viewed record.
func (v RecordView) Record() arrow.RecordBatch { return v.rec }

// Len returns the number of rows.
func (v RecordView) Len() int {
	if v.seq == nil {
		return 0
	}
	return v.seq.Len()
}

// Key returns the key of row i.
func (v RecordView) Key(i int) string { return v.key.Value(i) }

// Seq returns the write sequence of row i.
func (v RecordView) Seq(i int) int64 { return v.seq.Value(i) }

// Shard returns the shard that wrote row i.
func (v RecordView) Shard(i int) string { return v.shard.Value(i) }

// Deleted reports whether row i is a tombstone.
func (v RecordView) Deleted(i int) bool { return v.deleted.Value(i) }
