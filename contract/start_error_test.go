package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// StartErrorText keeps a start's error within MaxStartErrorBytes as JSON encodes it, whatever it
// holds: escaped characters, multi-byte runes, invalid bytes. A short error is kept whole.
func TestStartErrorBoundedAsJSON(t *testing.T) {
	for name, msg := range map[string]string{
		"ascii":   strings.Repeat("a", 500),
		"quotes":  strings.Repeat(`"\`, 300),
		"html":    strings.Repeat("<&>", 300),
		"control": strings.Repeat("\x01\n", 300),
		"runes":   strings.Repeat("é日", 300),
		"invalid": strings.Repeat("\xff", 300),
		"mixed":   "start merge-wal/generic/x: " + strings.Repeat("\"<é\xff\x02", 100),
	} {
		got := StartErrorText(msg)
		raw, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if enc := len(raw) - 2; enc > MaxStartErrorBytes { // less the quotes around it
			t.Errorf("%s: %d bytes as JSON, want ≤ %d: %q", name, enc, MaxStartErrorBytes, got)
		}
		if !strings.HasSuffix(got, "…") || !strings.HasPrefix(msg, strings.TrimSuffix(got, "…")) {
			t.Errorf("%s: %q is not a cut prefix of the message", name, got)
		}
		if name != "invalid" && name != "mixed" && !utf8.ValidString(got) {
			t.Errorf("%s: cut inside a rune: %q", name, got)
		}
	}
	if got := StartErrorText("workflow already running"); got != "workflow already running" {
		t.Errorf("short error changed: %q", got)
	}
	exact := strings.Repeat("a", MaxStartErrorBytes)
	if got := StartErrorText(exact); got != exact {
		t.Errorf("an error of exactly the bound was cut: %q", got)
	}
}
