package worker

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewLogger(t *testing.T) {
	for _, f := range []string{"", "json", "console"} {
		l, err := NewLogger(io.Discard, f, "debug")
		require.NoError(t, err, f)
		require.NotNil(t, l)
	}
	_, err := NewLogger(io.Discard, "xml", "info")
	assert.Error(t, err)
	_, err = NewLogger(io.Discard, "json", "loud")
	assert.Error(t, err)
}
