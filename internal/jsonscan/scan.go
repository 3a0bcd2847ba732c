// Package jsonscan is walkeeper's one hand-written JSON scanner: it finds the extent of JSON
// text by index and reads the few scalars the hand-written decoders need, each exactly as
// encoding/json reads them or not at all, and Fields names a struct's members as
// encoding/json does. It imports nothing of walkeeper, so that contract, a leaf, may use it.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrMalformed is what SplitObject returns for text that is not a JSON object, which cannot
// happen for input that passed json.Valid.
var ErrMalformed = errors.New("malformed JSON object")

// SkipWS returns the index of the first non-whitespace byte at or after i.
func SkipWS(b []byte, i int) int {
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

// SplitObject calls fn with the raw key (quoted) and raw value of each member of the valid
// JSON object raw, in order, stopping at the first error fn returns.
func SplitObject(raw []byte, fn func(key, val []byte) error) error {
	i := SkipWS(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return ErrMalformed
		}
		kEnd := scanString(raw, i)
		key := raw[i:kEnd]
		i = SkipWS(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return ErrMalformed
		}
		i = SkipWS(raw, i+1)
		vEnd := scanValue(raw, i)
		if err := fn(key, raw[i:vEnd]); err != nil {
			return err
		}
		i = SkipWS(raw, vEnd)
		if i >= len(raw) {
			break
		}
		switch raw[i] {
		case '}':
			return nil
		case ',':
			i = SkipWS(raw, i+1)
		default:
			return ErrMalformed
		}
	}
	return ErrMalformed
}

// SplitArray calls fn with the raw text of each element of the valid JSON array starting at
// raw[0] == '[', in order, stopping at the first error fn returns; what follows the array is
// not read.
func SplitArray(raw []byte, fn func(elem []byte) error) error {
	for i := SkipWS(raw, 1); i < len(raw) && raw[i] != ']'; {
		end := scanValue(raw, i)
		if err := fn(raw[i:end]); err != nil {
			return err
		}
		if i = SkipWS(raw, end); i < len(raw) && raw[i] == ',' {
			i = SkipWS(raw, i+1)
		}
	}
	return nil
}

// PlainString reads the JSON string starting at b[i] when it holds only bytes that
// encoding/json decodes as themselves (printable ASCII, no backslash). It returns the bytes
// between the quotes and the index just after the closing quote; ok is false when b[i] is
// not a quote, the string has an escape, a control or non-ASCII byte, or does not end.
func PlainString(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return b[i+1 : j], j + 1, true
		}
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return nil, i, false
		}
	}
	return nil, i, false
}

// Uint reads the JSON number starting at b[i] when it is an integer without sign, fraction
// or exponent that fits a uint64, returning it and the index just after it; ok is false on
// anything else (a leading zero, a '.', 'e' or 'E' after the digits, overflow).
func Uint(b []byte, i int) (v uint64, end int, ok bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		d := uint64(b[j] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, i, false
		}
		v = v*10 + d
		j++
	}
	if n := j - i; n == 0 || (n > 1 && b[i] == '0') {
		return 0, i, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, i, false
	}
	return v, j, true
}

// Int reads the JSON number starting at b[i] when it is an integer, with an optional minus
// sign but no fraction or exponent, within the int64 range; ok is false on anything else.
func Int(b []byte, i int) (v int64, end int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	j := i
	if neg {
		j++
	}
	u, end, ok := Uint(b, j)
	if !ok || u > 1<<63 || (u == 1<<63 && !neg) {
		return 0, i, false
	}
	if neg {
		return -int64(u), end, true
	}
	return int64(u), end, true
}

// Unquote decodes the raw JSON string raw (with its quotes) as encoding/json does, for
// valid UTF-8: without an escape it is the bytes between the quotes.
func Unquote(raw []byte) (string, error) {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// TextProblem reports invalid UTF-8 or a \u escape that is a lone UTF-16 surrogate in raw,
// valid JSON text (where a backslash occurs only inside strings, always starting an escape).
// It returns "" when b is fine.
func TextProblem(b []byte) string {
	if !utf8.Valid(b) {
		return "invalid UTF-8"
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 < len(b) && b[i+1] == 'u' {
			if r, ok := hex4(b, i+2); ok && utf16.IsSurrogate(r) {
				// A valid pair is a high surrogate followed by a low one; DecodeRune says
				// U+FFFD for anything else, a lone low surrogate first included.
				r2, ok2 := rune(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					r2, ok2 = hex4(b, i+8)
				}
				if !ok2 || utf16.DecodeRune(r, r2) == utf8.RuneError {
					return fmt.Sprintf("a lone UTF-16 surrogate escape \\u%04x", r)
				}
				i += 6
			}
		}
		i++ // skip the escaped character
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	r, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return rune(r), err == nil
}
