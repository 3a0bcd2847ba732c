// Package jsonscan finds the extent of JSON text by index, without decoding it: white
// space, strings, whole values and an object's members. The row codec splits a client's
// body with it after json.Valid; the manifest parser skips white space with it.
package jsonscan

import "errors"

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

// ScanString returns the index just after the JSON string starting at b[i] == '"'.
func ScanString(b []byte, i int) int {
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

// ScanValue returns the index just after the valid JSON value starting at b[i]. On invalid
// input it returns some index in (i, len(b)], never panicking.
func ScanValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return ScanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = ScanString(b, j) - 1
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
		kEnd := ScanString(raw, i)
		key := raw[i:kEnd]
		i = SkipWS(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return ErrMalformed
		}
		i = SkipWS(raw, i+1)
		vEnd := ScanValue(raw, i)
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
