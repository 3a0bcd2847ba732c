package contract

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// A workflow input ignores members its type has no field for, so a worker of an earlier build
// runs what a later build's starter wrote (docs/TEMPORAL.md); a member a person mistyped is
// ignored alike, so the workflows name them instead of refusing them (decision 0722).

// MaxUnknownFieldNames bounds the names UnknownInputFields reports; it counts every one.
const MaxUnknownFieldNames = 4

// UnknownInputFields reports the members of the JSON input data that decoding it into dst (a
// pointer to a workflow input) ignores, as paths such as `sweep.start_batchh` or
// `carry.shards[0].shardd`: at most MaxUnknownFieldNames of them, each clipped, and how many
// there are. It matches names as encoding/json does (exact, else case-insensitive), descends
// only into members a field takes, allocates only the names it reports (and an unquoted copy
// of a member name written with escapes), and stops at bytes that are not JSON
// (DecodeInputPayload refused those before). Pure.
func UnknownInputFields(data []byte, dst any) (names []string, total int) {
	w := unknownWalk{data: data, fields: map[reflect.Type][]jsonField{}}
	w.value(reflect.TypeOf(dst))
	return w.names, w.total
}

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	name string
	typ  reflect.Type
}

type unknownWalk struct {
	data   []byte
	i      int
	bad    bool // not JSON: stop
	fields map[reflect.Type][]jsonField
	names  []string
	total  int
	path   []pathStep // where w.i is, built into a name only when one is reported
}

// pathStep is a field's name, a map's key or an element's index.
type pathStep struct {
	name  string
	key   []byte
	index int
}

// plainDecoded are the types whose UnmarshalJSON decodes them field by field as encoding/json
// does (input_decode.go), so their fields are walked; any other type with its own decoding
// (time.Time) takes every member it is given.
var plainDecoded = map[reflect.Type]bool{
	reflect.TypeFor[MergeWalInput](): true, reflect.TypeFor[CompactBaseInput](): true,
	reflect.TypeFor[MaintenanceSweepInput](): true, reflect.TypeFor[SweepWindowInput](): true,
	reflect.TypeFor[MergeWalTickInput](): true, reflect.TypeFor[ReconcileDemandInput](): true,
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value walks the JSON value at w.i, decoded into a t, and moves past it.
func (w *unknownWalk) value(t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	w.space()
	if w.bad || w.i >= len(w.data) {
		w.bad = true
		return
	}
	switch c := w.data[w.i]; {
	case c == '{' && t != nil && t.Kind() == reflect.Struct && w.walked(t):
		w.object(func(key []byte) (reflect.Type, pathStep, bool) {
			f, ok := w.field(t, key)
			return f.typ, pathStep{name: f.name}, ok
		})
	case c == '{' && t != nil && t.Kind() == reflect.Map && !w.custom(t):
		w.object(func(key []byte) (reflect.Type, pathStep, bool) { return t.Elem(), pathStep{key: key}, true })
	case c == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !w.custom(t):
		w.i++
		for n := 0; !w.bad; n++ {
			if w.space(); w.i < len(w.data) && w.data[w.i] == ']' {
				w.i++
				return
			}
			w.path = append(w.path, pathStep{index: n, name: "[]"})
			w.value(t.Elem())
			w.path = w.path[:len(w.path)-1]
			w.comma(']')
		}
	default:
		w.skip()
	}
}

// object walks the object at w.i: member reports the type and path name of a member key,
// or false when no field takes it.
func (w *unknownWalk) object(member func(key []byte) (reflect.Type, pathStep, bool)) {
	w.i++
	for !w.bad {
		if w.space(); w.i < len(w.data) && w.data[w.i] == '}' {
			w.i++
			return
		}
		key := w.key()
		if w.space(); w.bad || w.i >= len(w.data) || w.data[w.i] != ':' {
			w.bad = true
			return
		}
		w.i++
		t, step, ok := member(key)
		if !ok {
			w.total++
			if len(w.names) < MaxUnknownFieldNames {
				w.names = append(w.names, w.name(key))
			}
			w.skip()
		} else {
			w.path = append(w.path, step)
			w.value(t)
			w.path = w.path[:len(w.path)-1]
		}
		w.comma('}')
	}
}

// name is the clipped path of member key of the object at w.path.
func (w *unknownWalk) name(key []byte) string {
	var b strings.Builder
	for _, s := range w.path {
		switch {
		case s.name == "[]":
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		case b.Len() > 0:
			b.WriteByte('.')
		}
		if s.name != "" {
			b.WriteString(Clip(s.name, quotedMax))
		} else {
			b.WriteString(Clip(string(s.key), quotedMax))
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(Clip(string(key), quotedMax))
	return Clip(b.String(), 2*quotedMax)
}

// walked reports whether the members of a struct t are matched to its fields.
func (w *unknownWalk) walked(t reflect.Type) bool { return plainDecoded[t] || !w.custom(t) }

// custom reports whether t decodes itself, taking whatever members it is given.
func (w *unknownWalk) custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// field is the field of t that encoding/json decodes member key into.
func (w *unknownWalk) field(t reflect.Type, key []byte) (jsonField, bool) {
	fs, ok := w.fields[t]
	if !ok {
		fs = jsonFields(t)
		w.fields[t] = fs
	}
	for _, f := range fs {
		if f.name == string(key) {
			return f, true
		}
	}
	for _, f := range fs {
		if bytes.EqualFold([]byte(f.name), key) {
			return f, true
		}
	}
	return jsonField{}, false
}

// jsonFields are the fields encoding/json decodes into a struct t, an untagged embedded
// struct's promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, jsonField{name: name, typ: sf.Type})
	}
	return out
}

// key reads the member name at w.i, unquoting it only when it has escapes.
func (w *unknownWalk) key() []byte {
	start := w.i
	w.str()
	if w.bad {
		return nil
	}
	raw := w.data[start:w.i]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		w.bad = true
	}
	return []byte(s)
}

// str moves past the string at w.i.
func (w *unknownWalk) str() {
	if w.i >= len(w.data) || w.data[w.i] != '"' {
		w.bad = true
		return
	}
	for w.i++; w.i < len(w.data); w.i++ {
		switch w.data[w.i] {
		case '\\':
			w.i++
		case '"':
			w.i++
			return
		}
	}
	w.bad = true
}

// skip moves past the value at w.i, whatever it holds.
func (w *unknownWalk) skip() {
	depth := 0
	for w.space(); w.i < len(w.data) && !w.bad; w.space() {
		switch w.data[w.i] {
		case '"':
			w.str()
		case '{', '[':
			depth++
			w.i++
		case '}', ']':
			if depth == 0 {
				return
			}
			depth--
			w.i++
		case ',', ':':
			if depth == 0 {
				return
			}
			w.i++
		default: // a number, true, false or null
			for w.i < len(w.data) && strings.IndexByte(",:}] \t\r\n\"", w.data[w.i]) < 0 {
				w.i++
			}
		}
		if depth == 0 {
			return
		}
	}
}

// comma moves past the comma after a member or element, or stops at end.
func (w *unknownWalk) comma(end byte) {
	w.space()
	switch {
	case w.i < len(w.data) && w.data[w.i] == ',':
		w.i++
	case w.i < len(w.data) && w.data[w.i] == end:
	default:
		w.bad = true
	}
}

func (w *unknownWalk) space() {
	for w.i < len(w.data) && strings.IndexByte(" \t\r\n", w.data[w.i]) >= 0 {
		w.i++
	}
}
