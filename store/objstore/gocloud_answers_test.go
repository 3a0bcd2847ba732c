package objstore

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A bounded body passes a body of its limit whole and refuses a longer one having read no
// more than limit+1 bytes of it.
func TestBoundedBodyReadsAtMostLimitPlusOne(t *testing.T) {
	for _, size := range []int64{99, 100, 101, 1 << 20} {
		src := &countingReader{}
		body := newBoundedBody(io.NopCloser(io.LimitReader(src, size)), 100, "answer")
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

// readWhole keeps an answer of its limit whole for the client to read again, and refuses a
// longer one.
func TestReadWholeKeepsTheAnswerUpToItsLimit(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("0123456789"))}
	got, err := readWhole(resp, 10, "answer")
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(got))
	again, _ := io.ReadAll(resp.Body)
	require.Equal(t, "0123456789", string(again))
	require.Equal(t, int64(10), resp.ContentLength)

	_, err = readWhole(&http.Response{Body: io.NopCloser(strings.NewReader("0123456789x"))}, 10, "answer")
	require.ErrorAs(t, err, new(answerTooLarge))
}
