package store

import (
	"context"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Read buffers charged to the read budget, so that reads stay within it. A read group's files
// that the cache will not keep ("private" files) are read into a readArena: large buffers of the
// read reservation's memAccount that the objects' bytes (which a decoded generation aliases,
// zero copy) are carved from. They are memory the read budget charged, outside the Go heap from
// mapMinBytes on, and go back to the read budget's pool when the group is released, for the next
// group to reuse without the Go allocator zeroing them or the collector counting them toward its
// heap goal.
//
// INVARIANT: nothing of a private file is used after its group's release: whatever a read
// keeps past it (keys, shard ids, rendered rows) is copied out first (strings.Clone,
// cloneRow), because the arena's buffers are handed to the next read.

// arenaChunk is the size of the buffers small objects are packed into; an object larger
// than a quarter of it gets a buffer of its own.
const arenaChunk = 1 << 20

// ipcObjectOverhead estimates what an IPC generation object holds beyond its record bytes
// (the manifest's size): the schema, twice (message and footer), the record's metadata and
// padding. Only the read reservation uses it; an object larger than estimated still reads.
const ipcObjectOverhead = 2 << 10

// decodedFileHeap is what one decoded private file keeps on the Go heap next to its arena
// bytes: the Arrow metadata of its record (schema, array data, buffers' headers: ~4 KiB per
// generation in the memory benchmark's allocation profile), doubled for the collector's
// headroom (GOGC 100). The read arena charges it to the read budget, so that the budget
// bounds a read's working set, not only its buffers.
const decodedFileHeap = 8 << 10

// arenaEstimate is the reservation that a group's private objects of about these (record)
// sizes take in an arena: objects, their overhead and one spare byte each, and the tail of
// a partly used chunk. Pure.
func arenaEstimate(sizes []int64) int64 {
	var small, large int64
	for _, sz := range sizes {
		n := max(sz, 0) + ipcObjectOverhead + 1
		if n > arenaChunk/4 {
			large += int64(classSize(classOf(int(n))))
		} else {
			small += n
		}
	}
	if small == 0 {
		return large
	}
	chunks := (small + arenaChunk - 1) / arenaChunk
	return large + chunks*arenaChunk
}

// readArena carves read buffers out of chunks of one account, for the objects of one
// group read concurrently. hint is what the group's objects are expected to need
// (arenaEstimate): a small group takes a chunk of about its size, not a whole arenaChunk.
type readArena struct {
	acct *memAccount
	heap int64 // decodedFileHeap of the group's files, charged while the arena lives
	mu   sync.Mutex
	hint int64
	used int64    // bytes carved so far
	bufs [][]byte // taken from acct, freed on free
	cur  []byte   // the chunk small objects are carved from: [0:len) carved, [len:cap) free
}

func newReadArena(a *memAccount, hint int64, files int) *readArena {
	r := &readArena{acct: a, hint: hint}
	if h := int64(files) * decodedFileHeap; a.tryCharge(h) {
		r.heap = h // else the reservation was clamped: the buffers get what it holds
	}
	return r
}

// take returns an empty buffer of capacity n, or nil when the account cannot hold one
// without waiting (the reservation was clamped to the budget's limit, or an object is
// larger than its manifest says): the read then uses the Go heap, as a read without a read
// budget does, so a read never fails or waits for want of arena.
func (r *readArena) take(n int) []byte {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > arenaChunk/4 {
		b, ok := r.acct.buffer(n, 0)
		if !ok {
			return nil
		}
		r.bufs = append(r.bufs, b)
		r.used += int64(n)
		return b[:0:n]
	}
	if cap(r.cur)-len(r.cur) < n {
		size := int(min(arenaChunk, max(r.hint-r.used, int64(n))))
		b, ok := r.acct.buffer(size, 0)
		if !ok {
			return nil
		}
		r.bufs = append(r.bufs, b)
		r.cur = b[:0:cap(b)]
	}
	off := len(r.cur)
	r.cur = r.cur[:off+n]
	r.used += int64(n)
	return r.cur[off : off : off+n]
}

// free returns the buffers to the account (and so to the budget's pool).
//
// REQUIRES: no record aliasing the arena is used any more.
func (r *readArena) free() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bufs {
		r.acct.Free(b)
	}
	r.acct.uncharge(r.heap)
	r.bufs, r.cur, r.heap = nil, nil, 0
}

// alloc is the allocator of Bucket reads into buffers of r, or of the Go heap where r has
// no room (nil: no arena). The arena owns its buffers: nothing is freed per read.
func (r *readArena) alloc() objstore.Alloc {
	if r == nil {
		return nil
	}
	return func(n int) ([]byte, error) {
		if b := r.take(n); b != nil {
			return b, nil
		}
		return make([]byte, 0, n), nil
	}
}

// readGen reads generation src into a buffer of alloc (nil: the Go heap) and decodes it into
// a sortedFile whose record aliases those bytes, so one read into an arena must not outlive
// its group (readArena). The reader's metadata is allocated from mem.
func (s *Store) readGen(ctx context.Context, src readSource, alloc objstore.Alloc, mem memory.Allocator) (_ *sortedFile, err error) {
	data, err := s.readGenObject(ctx, src.path, src.checksum, src.bytes, alloc)
	if err != nil {
		return nil, err // counted by readChecked
	}
	defer func() { s.countCorrupt(src.path, err) }()
	recs, err := decodeIPC(mem, data, s.codec, "generation "+src.path)
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 {
		releaseAll(recs)
		return nil, corruptf("generation %s has %d records, want 1", src.path, len(recs))
	}
	f, err := newSortedFile(s.codec, src.path, recs[0], "", false)
	if err != nil {
		recs[0].Release()
	}
	return f, err
}

// cloneRow copies the strings of a rendered row, which alias the decoded file it came from:
// a row kept past its group's release must not point into the group's buffers.
func cloneRow(m map[string]any) map[string]any {
	for k, v := range m {
		if sv, ok := v.(string); ok {
			m[k] = strings.Clone(sv)
		}
	}
	return m
}
