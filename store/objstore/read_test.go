package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Reads into one buffer of the object's size, bounded by a limit and taken from the
// caller's allocator; streamed puts that publish all or nothing.

func TestPutFromPublishesAllOrNothing(t *testing.T) {
	for _, be := range testBackends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			b, _ := be.open(t)
			want := bytes.Repeat([]byte("0123456789"), 300_000) // several bufio flushes
			n, err := b.PutFrom(ctx, "a/run.parquet", func(w io.Writer) error {
				for off := 0; off < len(want); off += 7777 {
					if _, err := w.Write(want[off:min(off+7777, len(want))]); err != nil {
						return err
					}
				}
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), n)
			got, err := b.Get(ctx, "a/run.parquet")
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "streamed object differs")

			// A failing producer leaves the previous object, never a prefix of the new one.
			boom := errors.New("encoder failed")
			_, err = b.PutFrom(ctx, "a/run.parquet", func(w io.Writer) error {
				_, _ = w.Write([]byte("partial"))
				return boom
			})
			require.ErrorIs(t, err, boom)
			got, err = b.Get(ctx, "a/run.parquet")
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "failed PutFrom replaced the object")
			_, err = b.PutFrom(ctx, "a/other.parquet", func(w io.Writer) error {
				_, _ = w.Write([]byte("partial"))
				return boom
			})
			require.ErrorIs(t, err, boom)
			_, err = b.Get(ctx, "a/other.parquet")
			require.ErrorIs(t, err, ErrNotFound)
			require.Equal(t, []string{"a/run.parquet"}, listKeys(t, b, "a/"), "no temp files or partial objects left")

			// It is OpPut for fault injection, like Put.
			fb := b.WithFaults(FaultFuncs{BeforeFunc: func(op, key string) error {
				if op == OpPut {
					return boom
				}
				return nil
			}})
			called := false
			_, err = fb.PutFrom(ctx, "a/faulted.parquet", func(w io.Writer) error { called = true; return nil })
			require.ErrorIs(t, err, boom)
			require.False(t, called)
		})
	}
}

func TestReadSizedToleratesWrongSize(t *testing.T) {
	for _, size := range []int64{-1, 0, 3, 10, 11, 1000} {
		got, err := readSized(strings.NewReader("0123456789"), size, -1, nil)
		require.NoError(t, err)
		require.Equal(t, "0123456789", string(got), "size hint %d", size)
	}
}

// countingReader counts the bytes a read takes from an endless stream.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func TestReadWithLimitReadsAtMostLimitPlusOne(t *testing.T) {
	for _, hint := range []int64{-1, 0, 10, 1 << 20} {
		r := &countingReader{}
		_, err := readSized(r, hint, 4096, nil)
		require.ErrorIs(t, err, ErrTooLarge, "size hint %d", hint)
		if hint > 4096 {
			require.Zero(t, r.n, "a reported size over the limit is refused before reading")
		} else {
			require.LessOrEqual(t, r.n, int64(4097), "size hint %d", hint)
		}
	}
	got, err := readSized(io.LimitReader(&countingReader{}, 4096), -1, 4096, nil)
	require.NoError(t, err)
	require.Len(t, got, 4096, "an object exactly at the limit reads")

	for _, be := range testBackends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			b, _ := be.open(t)
			require.NoError(t, b.Put(ctx, "x/obj", []byte("0123456789")))
			got, err := b.GetAtMost(ctx, "x/obj", 10, nil)
			require.NoError(t, err)
			require.Equal(t, "0123456789", string(got))
			_, err = b.GetAtMost(ctx, "x/obj", 9, nil)
			require.ErrorIs(t, err, ErrTooLarge)
			_, err = b.GetAtMost(ctx, "x/missing", 9, nil)
			require.ErrorIs(t, err, ErrNotFound)
			_, err = b.GetAtMost(ctx, "x/obj", -1, nil)
			require.ErrorIs(t, err, ErrInvalidInput)
		})
	}
}

func TestGetAtMostReadsIntoTheCallersBuffer(t *testing.T) {
	ctx := context.Background()
	b := mustOpen(t, fileURL(t.TempDir())+"?nosync=1")
	mustPut(t, b, "x/obj", "0123456789")
	var given []byte
	got, err := b.GetAtMost(ctx, "x/obj", 10, func(n int) ([]byte, error) {
		given = make([]byte, 0, n)
		return given, nil
	})
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(got))
	require.Same(t, &given[:1][0], &got[0], "the bytes are read into the allocator's buffer")

	refused := errors.New("no room")
	_, err = b.GetAtMost(ctx, "x/obj", 10, func(int) ([]byte, error) { return nil, refused })
	require.ErrorIs(t, err, refused)
}
