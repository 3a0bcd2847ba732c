package rowcodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/walkeeper/walkeeper/internal/jsonscan"
	"github.com/walkeeper/walkeeper/target"
)

// JSON → Row: DecodeJSON splits the raw body with jsonscan, walkeeper's one JSON scanner (no
// reflection, every problem named by row and field).

// DecodeJSON parses a JSON array of row objects into validated rows, taking a body whole or
// not at all: every problem (shape, a row over maxRowBytes, unknown, repeated, missing or
// mistyped fields, out-of-range numbers, bad base64, RFC 3339 or UTF-8) wraps ErrInvalidInput
// naming the row and field; a key over MaxKeyBytes is ErrKeyTooLong. A datagen event_id is
// derived when missing and must match when given. Timestamps become UTC microseconds.
func (c *Codec) DecodeJSON(body []byte, maxRowBytes int) ([]Row, error) {
	if !json.Valid(body) {
		// Slow path, only to say precisely where and what is wrong.
		return c.decodeJSONInvalid(body, maxRowBytes)
	}
	return c.DecodeValidJSON(body, maxRowBytes, 0)
}

// DecodeValidJSON is DecodeJSON's fast path for a body that is syntactically valid JSON, so it
// can be split by hand; capRows sizes the result (0 = grow as needed).
func (c *Codec) DecodeValidJSON(body []byte, maxRowBytes, capRows int) ([]Row, error) {
	i := jsonscan.SkipWS(body, 0)
	if body[i] != '[' {
		return nil, invalidf("body is not a JSON array of row objects (it is a JSON %s)", rawKind(body[i:]))
	}
	rows := make([]Row, 0, capRows)
	seen := make([]bool, len(c.names))
	err := jsonscan.SplitArray(body[i:], func(raw []byte) error {
		row, err := c.decodeRawRow(len(rows), raw, maxRowBytes, seen)
		rows = append(rows, row)
		return err
	})
	if err != nil {
		return nil, err
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

// decodeRawRow decodes row i from its raw JSON text, one valid value; seen is scratch space.
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
	textOK := jsonscan.TextProblem(raw) == ""
	clear(seen)
	vals := make([]any, len(c.names))
	err := jsonscan.SplitObject(raw, func(key, v []byte) error {
		if !textOK {
			if p := jsonscan.TextProblem(v); p != "" {
				return invalidf("row %d: field %q: %s", i, target.Clip(keyString(key)), p)
			}
			if p := jsonscan.TextProblem(key); p != "" {
				return invalidf("row %d: field name %q: %s", i, target.Clip(keyString(key)), p)
			}
		}
		j, ok := c.lookup(key)
		if !ok {
			return invalidf("row %d: unknown field %q (the %s schema has %s)", i, target.Clip(keyString(key)), c.kind, c.fieldList())
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
	if errors.Is(err, jsonscan.ErrMalformed) {
		return Row{}, invalidf("row %d: %v", i, err)
	}
	if err != nil {
		return Row{}, err
	}
	return c.finishRow(i, vals, seen)
}

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
	s, _ := jsonscan.Unquote(key) // "" when it fails
	return s
}

// fromRaw converts the raw JSON value of field j; on failure it returns a description.
func (c *Codec) fromRaw(j int, raw []byte) (any, string) {
	t := c.schema.Fields[j].Type
	if len(raw) == 0 {
		return nil, "empty value"
	}
	switch {
	case raw[0] == 'n':
		return nil, ""
	case raw[0] == '"' && (t == TypeString || t == TypeBinary || t == TypeTimestamp):
		s, err := jsonscan.Unquote(raw)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("invalid JSON string: %v", err)
		case t == TypeString:
			return s, ""
		case t == TypeBinary:
			return parseBinary(s)
		}
		return parseTimestamp(s)
	case isNumberStart(raw[0]) && t == TypeInt64:
		return parseInt64(string(raw))
	case isNumberStart(raw[0]) && t == TypeFloat64:
		return parseFloat64(string(raw))
	case t == TypeBool && (string(raw) == "true" || string(raw) == "false"):
		return string(raw) == "true", ""
	}
	return nil, wantGot(t, rawKind(raw))
}

// finishRow checks presence and nullability, derives the datagen event id and the key.
func (c *Codec) finishRow(i int, vals []any, seen []bool) (Row, error) {
	for j, v := range vals {
		if v != nil || c.schema.Fields[j].Nullable || c.kind == target.KindDatagen && j == c.key {
			continue
		}
		if seen[j] {
			return Row{}, invalidf("row %d: field %q: null is not allowed (the field is non-null)", i, c.names[j])
		}
		return Row{}, invalidf("row %d: field %q: missing (the field is non-null)", i, c.names[j])
	}
	if c.kind == target.KindDatagen {
		item, _ := vals[c.itemIdx].(string)
		checkpoint, _ := vals[c.checkpointIdx].(string)
		ordinal, _ := vals[c.ordinalIdx].(int64)
		for _, f := range []struct{ name, v string }{{"item_id", item}, {"checkpoint", checkpoint}} {
			if strings.IndexByte(f.v, 0) >= 0 {
				return Row{}, invalidf("row %d: field %q: NUL bytes are not allowed (they separate the parts of the derived event_id)", i, f.name)
			}
		}
		derived := DatagenEventID(item, checkpoint, ordinal)
		if vals[c.key] == nil {
			vals[c.key] = derived
		} else if given, _ := vals[c.key].(string); given != derived {
			return Row{}, invalidf("row %d: field %q: %q does not match the id derived from item_id, checkpoint and ordinal (%s); leave event_id out to have it derived", i, "event_id", target.Clip(given), derived)
		}
	}
	key, _ := vals[c.key].(string)
	if key == "" {
		return Row{}, invalidf("row %d: field %q: the key must not be empty", i, c.names[c.key])
	}
	if len(key) > MaxKeyBytes {
		return Row{}, CheckRowKey(fmt.Sprintf("row %d: field %q", i, c.names[c.key]), key)
	}
	return Row{Key: key, Values: vals}, nil
}

func (c *Codec) fieldList() string {
	const shown = 12
	if len(c.names) <= shown {
		return strings.Join(c.names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d fields)", strings.Join(c.names[:shown], ", "), len(c.names))
}
