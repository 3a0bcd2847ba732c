package jsonscan

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
)

// Field is a struct field as encoding/json names it.
type Field struct {
	Name string
	Type reflect.Type
}

// Fields are the fields encoding/json decodes into struct t, in declaration order, an
// untagged embedded struct's promoted. Both strict request bodies and workflow inputs match
// members against them, so they agree on what a member is. Pure.
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if ft := Deref(sf.Type); sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, Fields(ft)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, Field{Name: name, Type: sf.Type})
	}
	return out
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// DecodesItself reports whether encoding/json hands t's JSON to a method of t (or *t), whose
// member names are then t's own business.
func DecodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// Deref is t with its pointers taken off (nil stays nil).
func Deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
