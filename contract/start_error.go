package contract

import (
	"encoding/json"
	"unicode/utf8"
)

// MaxStartErrorBytes bounds StartOutcome.Error as JSON encodes it (escapes included): 512
// outcomes with 128-byte names and an error this long each are under MaxPayloadBytes
// (TestStartBatchPayloadBounded).
const MaxStartErrorBytes = 128

// StartError is err's text for a StartOutcome, cut on a rune boundary with "…" so its JSON
// encoding takes at most MaxStartErrorBytes. Pure.
func StartError(err error) string {
	msg := err.Error()
	const ellipsis = "…"
	budget := MaxStartErrorBytes
	n, cut := 0, -1 // cut: where to stop if the whole message does not fit
	for i := 0; i < len(msg); {
		_, size := utf8.DecodeRuneInString(msg[i:])
		w := jsonLen(msg[i : i+size])
		if cut < 0 && n+w > budget-len(ellipsis) {
			cut = i
		}
		if n += w; n > budget {
			return msg[:cut] + ellipsis
		}
		i += size
	}
	return msg
}

// jsonLen is how many bytes encoding/json writes for s, less the quotes.
func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}
