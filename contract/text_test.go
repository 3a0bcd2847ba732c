package contract

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A failure message cut for a blocked reason is cut between characters, never inside one.
func TestBackoffReasonClipsAtACharacterBoundary(t *testing.T) {
	msg := strings.Repeat("a", 199) + "€ and more"
	got := BackoffReason(2, msg)
	require.True(t, utf8.ValidString(got), "%q", got)
	require.Equal(t, BlockedBackoff+" (attempt 2: "+strings.Repeat("a", 199)+"…)", got)
	require.Equal(t, "short", Clip("short", 200))
}

func TestFormatBytes(t *testing.T) {
	require.Equal(t, "0 B", FormatBytes(0))
	require.Equal(t, "1023 B", FormatBytes(1023))
	require.Equal(t, "1.0 KiB", FormatBytes(1024))
	require.Equal(t, "12.0 MiB", FormatBytes(12<<20))
	require.Equal(t, "1.5 GiB", FormatBytes(3<<29))
	require.Equal(t, "2.0 EiB", FormatBytes(2<<60))
}

func TestFailureTextFitsItsBound(t *testing.T) {
	require.Equal(t, "prepare: boom", FailureText("prepare: boom"), "a short error is kept")
	got := FailureText(strings.Repeat("é", MaxFailureTextBytes))
	require.LessOrEqual(t, len(got), MaxFailureTextBytes)
	require.True(t, utf8.ValidString(got) && strings.HasSuffix(got, "…"), "%q", got)
}

// Text anyone can set reaches a terminal with its control characters and stray bytes escaped,
// and printable text, whatever its script, unchanged.
func TestPrintableEscapesWhatATerminalWouldObey(t *testing.T) {
	require.Equal(t, "count · é €", Printable("count · é €"))
	require.Equal(t, `a\x1b[31mred\nline\tcell\u2028\xff`, Printable("a\x1b[31mred\nline\tcell\u2028\xff"))
}
