package worker

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/walkeeper/walkeeper/internal/jsonscan"
)

// Strict JSON for request bodies: encoding/json matches member names case-insensitively and
// keeps the last of a repeated one, so checkMembers refuses, before decoding, any member name
// that is not exactly one of the struct's, or repeated.

// decodeStrict unmarshals body into v (a pointer) after checkMembers, refusing trailing data.
func decodeStrict(body []byte, v any) error {
	if err := checkMembers(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "%v", err)
	}
	if dec.More() {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "trailing data after the JSON value")
	}
	return nil
}

// checkMembers walks body once and refuses (invalid_json) malformed JSON and (invalid_input)
// any object that repeats a member, and any object decoded into a struct of t (nil: no type)
// with a member name that is not exactly one of the struct's.
func checkMembers(body []byte, t reflect.Type) error {
	if !json.Valid(body) {
		return invalidJSON(body)
	}
	if !bytes.Contains(body, []byte{'{'}) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return checkValue(dec, t)
}

// checkValue checks the next value of dec, decoded into t (nil: any). The recursion is as
// deep as the JSON, which json.Valid has bounded.
func checkValue(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
	}
	switch tok {
	case json.Delim('{'):
		members, values := shape(t, true)
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
			}
			name, _ := tok.(string)
			if seen[name] {
				return newAPIError(http.StatusBadRequest, CodeInvalidInput,
					"member %q is given twice in one JSON object (at byte %d)", clipText(name), dec.InputOffset())
			}
			seen[name] = true
			vt := values
			if members != nil {
				ft, ok := members[name]
				if !ok {
					return unknownMember(name, members)
				}
				vt = ft
			}
			if err := checkValue(dec, vt); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for _, et := shape(t, false); dec.More(); {
			if err := checkValue(dec, et); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
	}
	return nil
}

// unknownMember is the 400 for a member a struct does not have, naming the member it
// differs from only in case when there is one.
func unknownMember(name string, members map[string]reflect.Type) error {
	for m := range members {
		if strings.EqualFold(m, name) {
			return newAPIError(http.StatusBadRequest, CodeInvalidInput,
				"unknown member %q: member names are case-sensitive (did you mean %q?)", clipText(name), m)
		}
	}
	return newAPIError(http.StatusBadRequest, CodeInvalidInput,
		"unknown member %q (want %s)", clipText(name), strings.Join(slices.Sorted(maps.Keys(members)), ", "))
}

// shape is what a JSON object (object) or array decoded into t may hold: a struct's exact
// member names and their types, or (members nil) members or elements of one type (nil: any).
func shape(t reflect.Type, object bool) (members map[string]reflect.Type, values reflect.Type) {
	t = jsonscan.Deref(t)
	if t == nil || jsonscan.DecodesItself(t) {
		return nil, nil
	}
	switch k := t.Kind(); {
	case object && k == reflect.Struct:
		members = map[string]reflect.Type{}
		for _, f := range jsonscan.Fields(t) {
			members[f.Name] = f.Type
		}
		return members, nil
	case object && k == reflect.Map, !object && (k == reflect.Slice || k == reflect.Array):
		return nil, t.Elem()
	}
	return nil, nil
}
