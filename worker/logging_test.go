package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewLogger(t *testing.T) {
	for _, f := range []string{"", "json", "console"} {
		l, err := NewLogger(f, "debug")
		require.NoError(t, err, f)
		require.NotNil(t, l)
	}
	_, err := NewLogger("xml", "info")
	assert.Error(t, err)
	_, err = NewLogger("json", "loud")
	assert.Error(t, err)
}
