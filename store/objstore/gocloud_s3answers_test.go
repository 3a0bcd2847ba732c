package objstore

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// A bounded body passes a body of its limit whole and refuses a longer one having read no
// more than limit+1 bytes of it.
func TestBoundedBodyReadsAtMostLimitPlusOne(t *testing.T) {
	for _, size := range []int64{99, 100, 101, 1 << 20} {
		src := &countingReader{}
		body := &boundedBody{ReadCloser: io.NopCloser(io.LimitReader(src, size)), left: 101, limit: 100, what: "answer"}
		got, err := io.ReadAll(body)
		var tooLarge answerTooLarge
		if size <= 100 {
			require.NoError(t, err)
			require.Len(t, got, int(size))
		} else {
			require.True(t, errors.As(err, &tooLarge), "size %d: %v", size, err)
		}
		require.LessOrEqual(t, src.n, int64(101), "size %d", size)
	}
}
