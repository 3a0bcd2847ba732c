package contract

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/walkeeper/walkeeper/internal/jsonscan"
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
// of a member name written with escapes), and reports nothing for bytes that are not JSON
// (DecodeInputPayload refused those before). Pure.
func UnknownInputFields(data []byte, dst any) (names []string, total int) {
	if !json.Valid(data) {
		return nil, 0
	}
	w := unknownWalk{fields: map[reflect.Type][]jsonscan.Field{}}
	w.value(data[jsonscan.SkipWS(data, 0):], reflect.TypeOf(dst))
	return w.names, w.total
}

type unknownWalk struct {
	fields map[reflect.Type][]jsonscan.Field
	names  []string
	total  int
	path   []pathStep // where the walk is, built into a name only when one is reported
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

// value walks raw, one valid JSON value, decoded into a t.
func (w *unknownWalk) value(raw []byte, t reflect.Type) {
	t = jsonscan.Deref(t)
	if t == nil || len(raw) == 0 {
		return
	}
	switch k := t.Kind(); {
	case raw[0] == '{' && k == reflect.Struct && (plainDecoded[t] || !jsonscan.DecodesItself(t)):
		_ = jsonscan.SplitObject(raw, func(rawKey, val []byte) error {
			key := memberName(rawKey)
			if f, ok := w.field(t, key); ok {
				w.within(pathStep{name: f.Name}, val, f.Type)
				return nil
			}
			w.total++
			if len(w.names) < MaxUnknownFieldNames {
				w.names = append(w.names, w.name(key))
			}
			return nil
		})
	case raw[0] == '{' && k == reflect.Map && !jsonscan.DecodesItself(t):
		_ = jsonscan.SplitObject(raw, func(rawKey, val []byte) error {
			w.within(pathStep{key: memberName(rawKey)}, val, t.Elem())
			return nil
		})
	case raw[0] == '[' && (k == reflect.Slice || k == reflect.Array) && !jsonscan.DecodesItself(t):
		n := 0
		_ = jsonscan.SplitArray(raw, func(elem []byte) error {
			w.within(pathStep{index: n, name: "[]"}, elem, t.Elem())
			n++
			return nil
		})
	}
}

// within walks val, decoded into a t, at step below the current path.
func (w *unknownWalk) within(step pathStep, val []byte, t reflect.Type) {
	w.path = append(w.path, step)
	w.value(val, t)
	w.path = w.path[:len(w.path)-1]
}

// memberName is the name a raw member key (with its quotes) decodes to, the key's own bytes
// when it has no escape.
func memberName(rawKey []byte) []byte {
	if bytes.IndexByte(rawKey, '\\') < 0 {
		return rawKey[1 : len(rawKey)-1]
	}
	s, _ := jsonscan.Unquote(rawKey) // valid JSON: no error
	return []byte(s)
}

// name is the clipped path of member key of the object at w.path.
func (w *unknownWalk) name(key []byte) string {
	var b strings.Builder
	for _, s := range append(w.path, pathStep{key: key}) {
		switch {
		case s.name == "[]":
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		case b.Len() > 0:
			b.WriteByte('.')
		}
		b.WriteString(Clip(cmp.Or(s.name, string(s.key)), quotedMax))
	}
	return Clip(b.String(), 2*quotedMax)
}

// field is the field of t that encoding/json decodes member key into.
func (w *unknownWalk) field(t reflect.Type, key []byte) (jsonscan.Field, bool) {
	fs, ok := w.fields[t]
	if !ok {
		fs = jsonscan.Fields(t)
		w.fields[t] = fs
	}
	i := slices.IndexFunc(fs, func(f jsonscan.Field) bool { return f.Name == string(key) })
	if i < 0 {
		i = slices.IndexFunc(fs, func(f jsonscan.Field) bool { return bytes.EqualFold([]byte(f.Name), key) })
	}
	if i < 0 {
		return jsonscan.Field{}, false
	}
	return fs[i], true
}
