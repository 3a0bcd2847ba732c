package contract

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Clip is s cut to at most n bytes at a character boundary, with "…" (3 bytes more) appended
// when cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Printable is s with every rune that is not printable (control characters, line and
// paragraph separators) and every byte that is not UTF-8 written as a Go escape (\x1b, \n,
// \t), so that text anyone with namespace access can set, printed to a terminal, neither moves
// its cursor nor breaks a table's rows and columns. Pure.
func Printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// FormatBytes is n in binary units for people: "512 B", "1.5 MiB", "2.0 GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// MaxFailureTextBytes bounds the failure text a workflow records and carries, so one long
// error neither fails the continued run's input check nor swells its payloads.
const MaxFailureTextBytes = 4 << 10

// FailureText is s as a workflow records failure text: at most MaxFailureTextBytes, cut at a
// character boundary. Pure.
func FailureText(s string) string {
	if len(s) <= MaxFailureTextBytes {
		return s
	}
	return Clip(s, MaxFailureTextBytes-len("…"))
}

// MaxStartErrorBytes bounds StartOutcome.Error as JSON encodes it (escapes included): 512
// outcomes with 128-byte names and an error this long each are under MaxPayloadBytes
// (TestStartBatchPayloadBounded).
const MaxStartErrorBytes = 128

// StartErrorText is s, an error's text for a StartOutcome or a whole batch's failure that a
// sweep repeats in the skip of each of the batch's starts, cut on a rune boundary with "…" so
// its JSON encoding takes at most MaxStartErrorBytes. Pure.
func StartErrorText(s string) string {
	return clipJSON(s, MaxStartErrorBytes)
}

// FailureTextJSON is s cut on a rune boundary with "…" so that its JSON encoding, escapes
// included, takes at most MaxFailureTextBytes: FailureText bounds the bytes, which escaping
// can grow sixfold, so a list of them in one payload needs this bound. Pure.
func FailureTextJSON(s string) string {
	return clipJSON(s, MaxFailureTextBytes)
}

// clipJSON is msg cut on a rune boundary with "…" so its JSON encoding takes at most budget
// bytes, quotes aside. Pure.
func clipJSON(msg string, budget int) string {
	const ellipsis = "…"
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
