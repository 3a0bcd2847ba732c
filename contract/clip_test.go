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
