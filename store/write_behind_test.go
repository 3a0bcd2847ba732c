package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestWriteBehindKeepsBytesInOrder: writes of every size, across buffer boundaries, reach
// the writer whole and in order, and close frees both buffers.
func TestWriteBehindKeepsBytesInOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rng := rand.New(rand.NewPCG(5, 6))
	var want, got bytes.Buffer
	wb := newWriteBehind(nil, mem, &got)
	for _, n := range []int{0, 1, 7, writeBehindBuffer - 8, 1, writeBehindBuffer, 3 * writeBehindBuffer, 5000, 1} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want.Write(p)
		m := call(wb.Write(p)).must(t)
		require.Equal(t, n, m)
	}
	require.NoError(t, wb.close())
	require.True(t, bytes.Equal(want.Bytes(), got.Bytes()), "wrote %d bytes, got %d", want.Len(), got.Len())
	mem.AssertSize(t, 0)
}

type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	f.n--
	return len(p), nil
}

// TestWriteBehindReportsTheWritersError: an error of the underlying writer comes back from
// a later Write or from close, and nothing is written after it.
func TestWriteBehindReportsTheWritersError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	boom := errors.New("disk full")
	w := &failAfter{n: 1, err: boom}
	wb := newWriteBehind(nil, mem, w)
	p := make([]byte, writeBehindBuffer)
	var werr error
	for i := 0; i < 8 && werr == nil; i++ {
		_, werr = wb.Write(p)
	}
	require.ErrorIs(t, werr, boom)
	require.ErrorIs(t, wb.close(), boom)
	mem.AssertSize(t, 0)

	// An error on the last, partial buffer is close's.
	w = &failAfter{n: 0, err: boom}
	wb = newWriteBehind(nil, mem, w)
	require.NoError(t, errOf(wb.Write([]byte("tail"))))
	require.ErrorIs(t, wb.close(), boom)
	mem.AssertSize(t, 0)
}
