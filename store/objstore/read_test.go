package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
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
			require.True(t, mustGet(t, b, "a/run.parquet") == string(want), "streamed object differs")

			// A failing producer leaves the previous object, never a prefix of the new one.
			boom := errors.New("encoder failed")
			_, err = b.PutFrom(ctx, "a/run.parquet", func(w io.Writer) error {
				_, _ = w.Write([]byte("partial"))
				return boom
			})
			require.ErrorIs(t, err, boom)
			require.True(t, mustGet(t, b, "a/run.parquet") == string(want), "failed PutFrom replaced the object")
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

// countingAlloc gives heap buffers and counts their bytes, as a budgeted caller charges them.
type countingAlloc struct {
	bufs    [][]byte
	charged int
	largest int
}

func (c *countingAlloc) alloc(n int) ([]byte, error) {
	b := make([]byte, 0, n)
	c.bufs = append(c.bufs, b)
	c.charged += n
	c.largest = max(c.largest, n)
	return b, nil
}

// gave reports whether got lies in a buffer c gave.
func (c *countingAlloc) gave(got []byte) bool {
	for _, b := range c.bufs {
		if cap(b) > 0 && len(got) > 0 && &b[:1][0] == &got[0] && cap(got) <= cap(b) {
			return true
		}
	}
	return false
}

// A body longer than the size its storage reported (0 or -1 for a body it then delivers) is
// read on into buffers the caller's allocator gives: it used to grow on the Go heap by append,
// so a budgeted read held up to its limit in bytes nobody charged.
func TestFindingReadLongerThanReportedIsCharged(t *testing.T) {
	body := strings.Repeat("0123456789", 1000)
	for _, limit := range []int64{-1, int64(len(body)), 3 * int64(len(body))} {
		for _, size := range []int64{-1, 0, 10, int64(len(body)) - 1} {
			var c countingAlloc
			got, err := readSized(strings.NewReader(body), size, limit, c.alloc)
			require.NoError(t, err, "limit %d, size %d", limit, size)
			require.Equal(t, body, string(got))
			require.True(t, c.gave(got), "limit %d, size %d: the object is in a buffer alloc gave", limit, size)
			require.LessOrEqual(t, c.charged, 4*len(body)+readGrowthFloor, "limit %d, size %d: growth doubles", limit, size)
			if limit >= 0 {
				require.LessOrEqual(t, int64(c.largest), limit+1, "limit %d, size %d", limit, size)
			}
		}
	}

	// A body reported as 0 bytes grows from readGrowthFloor, not one byte at a time.
	big := strings.Repeat("x", 1<<20)
	var grown countingAlloc
	got, err := readSized(strings.NewReader(big), 0, int64(len(big)), grown.alloc)
	require.NoError(t, err)
	require.Equal(t, big, string(got))
	require.Len(t, grown.bufs, 7, "1 byte, then 64 KiB doubling to the limit, 1 MiB + 1")

	// Growth stops at limit+1: a longer body fails after at most that many bytes.
	var c countingAlloc
	r := &countingReader{}
	_, err = readSized(r, 0, 4096, c.alloc)
	require.ErrorIs(t, err, ErrTooLarge)
	require.LessOrEqual(t, c.largest, 4097)
	require.LessOrEqual(t, r.n, int64(4097))

	// A growth the allocator refuses fails the read with its error.
	refused := errors.New("no room")
	asked := 0
	_, err = readSized(strings.NewReader(body), 10, -1, func(n int) ([]byte, error) {
		if asked++; asked > 1 {
			return nil, refused
		}
		return make([]byte, 0, n), nil
	})
	require.ErrorIs(t, err, refused)

	// An allocator that gives less than asked is refused rather than grown past on the heap.
	_, err = readSized(strings.NewReader(body), int64(len(body)), -1, func(n int) ([]byte, error) {
		return make([]byte, 0, n/2), nil
	})
	require.Error(t, err)
}

// An S3-compatible server that sends bodies chunked, without Content-Length, has gocloud
// report every object 0 bytes long: its reads go on into the caller's buffers all the same.
func TestS3BodyWithoutContentLengthReadsIntoTheCallersBuffers(t *testing.T) {
	ctx := context.Background()
	b := mustOpen(t, s3test.NoLengthBucketURL(t, "nolength"))

	want := bytes.Repeat([]byte("0123456789"), 30_000)
	require.NoError(t, b.Put(ctx, "x/obj", want))
	var c countingAlloc
	got, err := b.GetAtMost(ctx, "x/obj", int64(len(want)), c.alloc)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	require.Equal(t, 1, cap(c.bufs[0]), "the storage reported no length")
	require.True(t, c.gave(got), "the object is in a buffer alloc gave")
	require.LessOrEqual(t, c.largest, len(want)+1)

	_, err = b.GetAtMost(ctx, "x/obj", int64(len(want))-1, c.alloc)
	require.ErrorIs(t, err, ErrTooLarge)
}
