package store

import (
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// writeBehindBuffer is the size of each of a writeBehind's two buffers: the unit handed to
// the storage writer, large enough that a file write is one sequential syscall.
const writeBehindBuffer = 1 << 20

// writeBehind streams bytes to w from a goroutine of its own, a buffer behind the producer, so
// encoding and storage writes overlap on two cores. Its two buffers come from mem (counted by
// mergeFootprint) and are freed by close; an error of w is returned by the next Write or by
// close, and nothing more is written after it.
//
// INVARIANT: w is only called from the goroutine, and in the order the bytes were written.
type writeBehind struct {
	mem  memory.Allocator
	buf  []byte      // the buffer being filled
	full chan []byte // filled buffers, to the goroutine
	free chan []byte // written buffers, back from it (room for both: it never blocks)
	done chan struct{}
	all  [2][]byte

	mu  sync.Mutex
	err error // the goroutine's first error
}

func (b *writeBehind) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// db logs and counts a panic of w, which becomes the goroutine's error; nil only where w
// cannot panic (tests).
func newWriteBehind(db *DB, mem memory.Allocator, w io.Writer) *writeBehind {
	b := &writeBehind{mem: mem, full: make(chan []byte), free: make(chan []byte, 2), done: make(chan struct{})}
	for i := range b.all {
		b.all[i] = mem.Allocate(writeBehindBuffer)
	}
	b.buf = b.all[0][:0]
	b.free <- b.all[1][:0]
	go func() {
		defer close(b.done)
		var err error
		for p := range b.full {
			if err == nil {
				if err = db.guard("write-behind", func() error { _, err := w.Write(p); return err })(); err != nil {
					b.mu.Lock()
					b.err = err
					b.mu.Unlock()
				}
			}
			b.free <- p[:0]
		}
	}()
	return b
}

func (b *writeBehind) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := copy(b.buf[len(b.buf):cap(b.buf)], p)
		b.buf, p, n = b.buf[:len(b.buf)+c], p[c:], n+c
		if len(b.buf) == cap(b.buf) {
			// To the goroutine; the other buffer comes back once the goroutine has written it.
			b.full <- b.buf
			b.buf = <-b.free
			if err := b.failed(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// close writes what is buffered, waits for the goroutine and frees the buffers. It returns
// the first error of w. Safe to call once, on every path (also after a failed Write).
func (b *writeBehind) close() error {
	if len(b.buf) > 0 {
		b.full <- b.buf
		b.buf = nil
	}
	close(b.full)
	<-b.done
	for _, p := range b.all {
		b.mem.Free(p)
	}
	return b.failed()
}
