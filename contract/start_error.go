package contract

import "unicode/utf8"

// MaxStartErrorBytes bounds StartOutcome.Error as JSON encodes it (escapes included): 512
// outcomes with 128-byte names and an error this long each are under MaxPayloadBytes
// (TestStartBatchPayloadBounded).
const MaxStartErrorBytes = 128

// StartError is err's text for a StartOutcome: cut on a rune boundary, with "…", so that
// its JSON encoding (encoding/json, as the SDK's converter writes it: `"` and `\` two bytes,
// <, >, &, control characters and invalid bytes six) takes at most MaxStartErrorBytes.
// Pure.
func StartError(err error) string {
	msg := err.Error()
	const ellipsis = "…"
	budget := MaxStartErrorBytes
	n, cut := 0, -1 // cut: where to stop if the whole message does not fit
	for i, r := range msg {
		w := jsonLen(r, msg[i:])
		if cut < 0 && n+w > budget-len(ellipsis) {
			cut = i
		}
		if n += w; n > budget {
			return msg[:cut] + ellipsis
		}
	}
	return msg
}

// jsonLen is how many bytes encoding/json writes for the rune r at the start of rest.
func jsonLen(r rune, rest string) int {
	switch {
	case r == utf8.RuneError && len(rest) > 0 && rest[0] >= utf8.RuneSelf:
		if _, size := utf8.DecodeRuneInString(rest); size == 1 {
			return 6 // an invalid byte: \ufffd
		}
		return 3
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}
