package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzScalars holds the scalar readers to encoding/json: whatever they accept, encoding/json
// decodes to the same value from the same bytes.
func FuzzScalars(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b"`, `"\u00e9"`, `"é"`, `""`, `0`, `7,`, `01`, `-0`,
		`-9223372036854775808`, `9223372036854775808`, `18446744073709551615`, `18446744073709551616`,
		`1.5`, `1e3`, `- 1`, `-`, `"open`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, end, ok := PlainString(b, 0); ok {
			var want string
			if err := json.Unmarshal(b[:end], &want); err != nil || want != string(s) {
				t.Fatalf("PlainString(%q) = %q; encoding/json: %q, %v", b, s, want, err)
			}
		}
		if v, end, ok := Uint(b, 0); ok {
			var want uint64
			if err := json.Unmarshal(b[:end], &want); err != nil || want != v {
				t.Fatalf("Uint(%q) = %d; encoding/json: %d, %v", b, v, want, err)
			}
		}
		if v, end, ok := Int(b, 0); ok {
			var want int64
			if err := json.Unmarshal(b[:end], &want); err != nil || want != v {
				t.Fatalf("Int(%q) = %d; encoding/json: %d, %v", b, v, want, err)
			}
		}
		if end := scanString(b, 0); len(b) > 0 && b[0] == '"' && end <= len(b) && TextProblem(b[:end]) == "" && json.Valid(b[:end]) {
			var want string
			got, err := Unquote(b[:end])
			if jerr := json.Unmarshal(b[:end], &want); err != nil || jerr != nil || got != want {
				t.Fatalf("Unquote(%q) = %q, %v; encoding/json: %q, %v", b[:end], got, err, want, jerr)
			}
		}
	})
}

// FuzzSplitArray holds SplitArray to encoding/json: the elements of a valid array are the
// raw values encoding/json decodes it into, in order.
func FuzzSplitArray(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `[1]`, `[ "a\"]" , {"b":[1,2]} ,[[]],null ]`, `[-1.5e3,true,{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil {
			return
		}
		var got []json.RawMessage
		_ = SplitArray(b[SkipWS(b, 0):], func(elem []byte) error {
			got = append(got, elem)
			return nil
		})
		if !slices.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("SplitArray(%q) = %q; encoding/json: %q", b, got, want)
		}
	})
}
