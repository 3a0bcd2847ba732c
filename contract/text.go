package contract

import (
	"fmt"
	"unicode/utf8"
)

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

// MaxFailureTextBytes bounds the failure text a workflow records from an activity error and
// carries across continue-as-new (a MergeWal shard's error, a reconcile's problems, a sweep
// round's failure), far inside the carries' 64 KiB bound: one long error must neither fail
// the continued run's input check nor swell its payloads.
const MaxFailureTextBytes = 4 << 10

// FailureText is s as a workflow records failure text: at most MaxFailureTextBytes, cut at a
// character boundary. Pure.
func FailureText(s string) string {
	if len(s) <= MaxFailureTextBytes {
		return s
	}
	return Clip(s, MaxFailureTextBytes-len("…"))
}
