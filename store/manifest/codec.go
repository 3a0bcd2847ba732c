package manifest

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/walkeeper/walkeeper/internal/jsonscan"
)

// The JSON codec of the shard and base manifests without reflection, since encoding/json was
// most of a 200-writer table's CPU (docs/benchmarks/incident.md). The format does not change
// (docs/FORMAT.md): the encoders write exactly json.Marshal's bytes, and anything the decoders
// do not read exactly as json.Unmarshal would makes them give up and let encoding/json decide.

// field is one member of a manifest object: its JSON name and a pointer to its value (*string,
// *uint64, *int64, *time.Time, *[]Gen, *[]Run or *map[string]uint64); omitEmpty as in JSON.
type field struct {
	name      string
	ptr       any
	omitEmpty bool
}

// The members of each object in declaration order (json.Marshal's), appended to f so listing
// them allocates nothing; Quarantined is not one (encoding/json handles those manifests).

func shardFields(m *Shard, f []field) []field {
	return append(f,
		field{"shard", &m.Shard, false},
		field{"version", &m.Version, false},
		field{"writer_epoch", &m.WriterEpoch, false},
		field{"next_generation", &m.NextGeneration, false},
		field{"flushed", &m.Flushed, false},
		field{"replay_after", &m.ReplayAfter, false},
		field{"max_seq", &m.MaxSeq, false},
		field{"updated_at", &m.UpdatedAt, false},
	)
}

func genFields(g *Gen, f []field) []field {
	return append(f,
		field{"gen", &g.Gen, false},
		field{"path", &g.Path, false},
		field{"rows", &g.Rows, false},
		field{"bytes", &g.Bytes, false},
		field{"min_key", &g.MinKey, false},
		field{"max_key", &g.MaxKey, false},
		field{"min_seq", &g.MinSeq, false},
		field{"max_seq", &g.MaxSeq, false},
		field{"sealed_at", &g.SealedAt, false},
		field{"crc32c", &g.Checksum, true},
	)
}

func baseFields(m *Base, f []field) []field {
	return append(f,
		field{"version", &m.Version, false},
		field{"runs", &m.Runs, false},
		field{"watermarks", &m.Watermarks, false},
		field{"created_at", &m.CreatedAt, false},
		field{"reason", &m.Reason, true},
	)
}

func runFields(r *Run, f []field) []field {
	return append(f,
		field{"id", &r.ID, false},
		field{"path", &r.Path, false},
		field{"rows", &r.Rows, false},
		field{"bytes", &r.Bytes, false},
		field{"min_key", &r.MinKey, false},
		field{"max_key", &r.MaxKey, false},
		field{"min_seq", &r.MinSeq, false},
		field{"max_seq", &r.MaxSeq, false},
		field{"deletes", &r.Deletes, false},
		field{"crc32c", &r.Checksum, true},
		field{"source", &r.Source, true},
	)
}

// maxFields sizes the buffers the field lists are appended to (Run has the most).
const maxFields = 11

// EncodeShard is json.Marshal(m), byte for byte.
func EncodeShard(m *Shard) ([]byte, error) {
	var buf [maxFields]field
	return encode(m, len(m.Quarantined) > 0, shardFields(m, buf[:0]), 160+len(m.Flushed)*256)
}

// EncodeBase is json.Marshal(m), byte for byte.
func EncodeBase(m *Base) ([]byte, error) {
	var buf [maxFields]field
	return encode(m, len(m.Quarantined) > 0, baseFields(m, buf[:0]), 128+len(m.Runs)*320+len(m.Watermarks)*64)
}

// encode writes fields, the members of m, in a buffer of capacity size, unless m has
// quarantined objects or a time that does not encode, which json.Marshal(m) writes or refuses.
func encode(m any, quarantined bool, fields []field, size int) ([]byte, error) {
	if !quarantined {
		if b, ok := appendObject(make([]byte, 0, size), fields); ok {
			return b, nil
		}
	}
	return json.Marshal(m)
}

// appendObject appends the object of fields as json.Marshal writes it; false when a time
// has no JSON form (time.Time.MarshalJSON refuses a year past 9999).
func appendObject(b []byte, fields []field) ([]byte, bool) {
	ok := true
	for i, f := range fields {
		if f.omitEmpty && *f.ptr.(*string) == "" {
			continue
		}
		if i == 0 {
			b = append(b, `{"`...)
		} else {
			b = append(b, `,"`...)
		}
		b = append(append(b, f.name...), `":`...)
		var valueOK bool
		b, valueOK = appendValue(b, f.ptr)
		ok = ok && valueOK
	}
	return append(b, '}'), ok
}

// appendValue appends the value ptr points to (see field) as json.Marshal writes it.
func appendValue(b []byte, ptr any) ([]byte, bool) {
	switch v := ptr.(type) {
	case *string:
		return appendJSONString(b, *v), true
	case *uint64:
		return strconv.AppendUint(b, *v, 10), true
	case *int64:
		return strconv.AppendInt(b, *v, 10), true
	case *time.Time:
		// time.Time.MarshalJSON writes the strict RFC 3339 of AppendText, quoted.
		out, err := v.AppendText(append(b, '"'))
		return append(out, '"'), err == nil
	case *[]Gen:
		return appendList(b, *v, genFields)
	case *[]Run:
		return appendList(b, *v, runFields)
	case *map[string]uint64:
		if *v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(*v)) { // json.Marshal sorts map keys
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendJSONString(b, k), ':')
			b = strconv.AppendUint(b, (*v)[k], 10)
		}
		return append(b, '}'), true
	}
	panic("manifest: a field of unexpected type")
}

// appendList appends list, a list of objects, as json.Marshal writes it.
func appendList[T any](b []byte, list []T, fields func(*T, []field) []field) ([]byte, bool) {
	if list == nil {
		return append(b, "null"...), true
	}
	ok := true
	var buf [maxFields]field
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var elemOK bool
		b, elemOK = appendObject(b, fields(&list[i], buf[:0]))
		ok = ok && elemOK
	}
	return append(b, ']'), ok
}

// plainJSONByte reports whether json.Marshal writes c inside a string as itself: printable
// ASCII other than the quote, the backslash and the three it escapes for HTML.
func plainJSONByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendJSONString appends s as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSONByte(s[i]) {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// UnmarshalShard is json.Unmarshal(raw, m) (m zero on entry): the fast path for the
// shape EncodeShard writes, encoding/json for anything else.
func UnmarshalShard(raw []byte, m *Shard) error {
	var buf [maxFields]field
	if parseDocument(raw, shardFields(m, buf[:0])) {
		return nil
	}
	*m = Shard{}
	return json.Unmarshal(raw, m)
}

// UnmarshalBase is json.Unmarshal(raw, m) (m zero on entry): the fast path for the
// shape EncodeBase writes, encoding/json for anything else.
func UnmarshalBase(raw []byte, m *Base) error {
	var buf [maxFields]field
	if parseDocument(raw, baseFields(m, buf[:0])) {
		return nil
	}
	*m = Base{}
	return json.Unmarshal(raw, m)
}

// parser reads JSON of exactly a manifest's shape; every method returns false at the first
// thing it does not handle as encoding/json would, never an error of its own.
type parser struct {
	b []byte
	i int
}

// parseDocument reads a whole manifest into fields: one object, then only white space.
func parseDocument(raw []byte, fields []field) bool {
	p := parser{b: raw}
	if !p.object(fields) {
		return false
	}
	p.ws()
	return p.i == len(p.b)
}

func (p *parser) ws() { p.i = jsonscan.SkipWS(p.b, p.i) }

// tok consumes c (after whitespace).
func (p *parser) tok(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads an object whose members are all among fields.
func (p *parser) object(fields []field) bool {
	return p.members(func(key []byte) bool {
		for _, f := range fields {
			if f.name == string(key) {
				return p.value(f.ptr)
			}
		}
		return false // quarantined, or a field this release does not know
	})
}

// members reads {"key":value,...}, calling value for each key with the parser at the value.
// Keys are strings encoding/json decodes as their bytes (jsonscan.PlainString).
func (p *parser) members(value func(key []byte) bool) bool {
	if !p.tok('{') {
		return false
	}
	if p.tok('}') {
		return true
	}
	for {
		p.ws()
		key, end, ok := jsonscan.PlainString(p.b, p.i)
		p.i = end
		if !ok || !p.tok(':') || !value(key) {
			return false
		}
		if !p.tok(',') {
			return p.tok('}')
		}
	}
}

// value reads the value ptr points to (see field).
func (p *parser) value(ptr any) bool {
	p.ws()
	switch v := ptr.(type) {
	case *string:
		s, end, ok := jsonscan.PlainString(p.b, p.i)
		*v, p.i = string(s), end
		return ok
	case *uint64:
		n, end, ok := jsonscan.Uint(p.b, p.i)
		*v, p.i = n, end
		return ok
	case *int64:
		n, end, ok := jsonscan.Int(p.b, p.i)
		*v, p.i = n, end
		return ok
	case *time.Time:
		_, end, ok := jsonscan.PlainString(p.b, p.i)
		// time.Time's own decoder, as encoding/json calls it.
		ok = ok && v.UnmarshalJSON(p.b[p.i:end]) == nil
		p.i = end
		return ok
	case *[]Gen:
		return parseList(p, v, 64, genFields)
	case *[]Run:
		return parseList(p, v, 16, runFields)
	case *map[string]uint64:
		// Like encoding/json, a repeated key adds to the map an earlier one made.
		if *v == nil {
			*v = map[string]uint64{}
		}
		return p.members(func(key []byte) bool {
			var n uint64
			if !p.value(&n) {
				return false
			}
			(*v)[string(key)] = n
			return true
		})
	}
	return false
}

// parseList reads a JSON array of objects into a new slice of capacity capHint that replaces
// *dst, as encoding/json does for a repeated key.
func parseList[T any](p *parser, dst *[]T, capHint int, fields func(*T, []field) []field) bool {
	if !p.tok('[') {
		return false
	}
	out := make([]T, 0, capHint)
	var buf [maxFields]field
	if !p.tok(']') {
		for {
			var zero T
			out = append(out, zero)
			if !p.object(fields(&out[len(out)-1], buf[:0])) {
				return false
			}
			if !p.tok(',') {
				break
			}
		}
		if !p.tok(']') {
			return false
		}
	}
	*dst = out
	return true
}
