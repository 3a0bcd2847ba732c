package store

import (
	"context"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Read buffers charged to the read budget: a group's files the cache will not keep
// ("private" files) are read into a readArena, large buffers of the read reservation's
// memAccount that go back to the budget's pool when the group is released, for the next group
// to reuse without the Go allocator zeroing them.
//
// INVARIANT: nothing of a private file is used after its group's release: whatever a read
// keeps past it is copied out first (strings.Clone, cloneRow).

// arenaChunk is the size of the buffers small objects are packed into; an object larger
// than a quarter of it gets a buffer of its own.
const arenaChunk = 1 << 20

// ipcObjectOverhead estimates what an IPC generation object holds beyond its record bytes
// (the manifest's size): the schema, twice (message and footer), the record's metadata and
// padding. Only the read reservation uses it; an object larger than estimated reads if the
// reservation can grow without waiting.
const ipcObjectOverhead = 2 << 10

// decodedFileHeap is what one decoded private file keeps on the Go heap next to its arena
// bytes (~4 KiB of Arrow metadata per generation, measured), doubled for GOGC's headroom;
// charged so the budget bounds a read's working set, not only its buffers.
const decodedFileHeap = 8 << 10

// arenaEstimate is what a group's private objects of about these record sizes take in an
// arena, with their overhead, a spare byte each and a partly used chunk's tail. Pure.
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

// readArena carves read buffers out of chunks of one account for the objects of one group;
// hint (arenaEstimate) keeps a small group's chunk about its size.
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

// take returns an empty buffer of capacity n, growing the reservation without waiting past
// the estimate (packing leaves chunk tails unused), or nil when it cannot grow.
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

// alloc is the allocator of Bucket reads into buffers of r (nil: no arena); a buffer the
// reservation cannot hold fails the read with errBufferRefused, as any read buffer does, since
// one from the Go heap would be held uncharged. The arena owns its buffers: nothing is freed
// per read.
func (r *readArena) alloc() objstore.Alloc {
	if r == nil {
		return nil
	}
	return func(n int) ([]byte, error) {
		if b := r.take(n); b != nil {
			return b, nil
		}
		return nil, errBufferRefused
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
