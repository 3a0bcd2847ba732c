package contract

import "unicode/utf8"

// Clip is s cut to at most n bytes at a character boundary, with an ellipsis when it was
// cut: text from a failure or an input, bounded before it goes into a status, a summary or an
// error message, and never split inside a character.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
