package store

import (
	"context"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// A group's private files are read into a readArena, buffers of the read reservation that go
// back to the budget's pool when the group is released.
//
// INVARIANT: nothing of a private file is used after its group's release: whatever a read
// keeps past it is copied out first (strings.Clone, cloneRow).

// arenaChunk is the size of the buffers small objects are packed into.
const arenaChunk = 1 << 20

// decodedFileHeap is what one decoded private file keeps on the Go heap beside its arena
// bytes (its Arrow metadata, doubled for GOGC's headroom).
const decodedFileHeap = 8 << 10

// ownArenaBuffer reports whether an object whose read asks for at most request bytes gets a
// buffer of its own rather than a place in a chunk.
func ownArenaBuffer(request int64) bool { return request > arenaChunk/4 }

// arenaRequest is the largest buffer the read of private source src asks its arena for.
func (s *Store) arenaRequest(src readSource) int64 {
	n := min(max(src.bytes, 0), maxReadBufferRequest)
	if !src.run {
		n = s.genFileLimit(n)
	}
	return n + 1
}

// arenaEstimate is the most an arena takes for objects whose reads ask for at most requests,
// in any order: each chunk left holds more than arenaChunk-widest of the small bytes, and one
// opened when the rest fits is sized for it, so ceil(small/(arenaChunk-widest)) chunks.
func arenaEstimate(requests []int64) int64 {
	var large, small, widest int64
	for _, n := range requests {
		n = max(n, 0)
		if ownArenaBuffer(n) {
			large += int64(classSize(classOf(int(n))))
		} else {
			small += n
			widest = max(widest, n)
		}
	}
	switch {
	case small == 0:
		return large
	case small <= arenaChunk:
		return large + int64(classSize(classOf(int(small))))
	}
	chunks := (small + arenaChunk - widest - 1) / (arenaChunk - widest)
	last := min(arenaChunk, small-(chunks-1)*(arenaChunk-widest))
	return large + (chunks-1)*arenaChunk + int64(classSize(classOf(int(last))))
}

// readArena carves read buffers out of chunks of one account for the objects of one group,
// within arenaEstimate of their requests.
type readArena struct {
	acct *memAccount
	heap int64 // decodedFileHeap of the group's files, charged while the arena lives
	mu   sync.Mutex
	// toPack is what the small objects not yet packed may ask for (arenaEstimate).
	toPack int64
	bufs   [][]byte // taken from acct, freed on free
	cur    []byte   // the chunk small objects are carved from: [0:len) carved, [len:cap) free
}

// newReadArena is the arena of a group of private objects whose reads ask for at most
// requests (arenaRequest).
func newReadArena(a *memAccount, requests []int64) *readArena {
	r := &readArena{acct: a}
	for _, n := range requests {
		if !ownArenaBuffer(n) {
			r.toPack += max(n, 0)
		}
	}
	if h := int64(len(requests)) * decodedFileHeap; a.tryCharge(h) {
		r.heap = h // else the reservation was clamped: the buffers get what it holds
	}
	return r
}

// take returns an empty buffer of capacity n for an object whose read asks for at most
// request bytes, or nil when the reservation cannot grow to hold it; a grown read is not
// counted off toPack again.
func (r *readArena) take(n int, request int64, grown bool) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ownArenaBuffer(max(request, int64(n))) {
		b, ok := r.acct.buffer(n, 0)
		if !ok {
			return nil
		}
		r.bufs = append(r.bufs, b)
		return b[:0:n]
	}
	if cap(r.cur)-len(r.cur) < n {
		size := int(min(arenaChunk, max(r.toPack, int64(n))))
		b, ok := r.acct.buffer(size, 0)
		if !ok {
			return nil
		}
		r.bufs = append(r.bufs, b)
		r.cur = b[:0:cap(b)]
	}
	off := len(r.cur)
	r.cur = r.cur[:off+n]
	if !grown {
		r.toPack -= max(request, int64(n))
	}
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

// alloc is the allocator of one object's read into r, failing with errBufferRefused rather
// than taking an uncharged buffer from the Go heap; r frees every buffer at once.
func (r *readArena) alloc(request int64) objstore.Alloc {
	grown := false
	return func(n int) ([]byte, error) {
		b := r.take(n, request, grown)
		if b == nil {
			return nil, errBufferRefused
		}
		grown = true
		return b, nil
	}
}

// readGen reads generation src into a buffer of alloc (nil: the Go heap) and decodes it into
// a sortedFile whose record aliases those bytes.
func (s *Store) readGen(ctx context.Context, src readSource, alloc objstore.Alloc, mem memory.Allocator) (_ *sortedFile, err error) {
	data, err := s.readChecked(ctx, src.path, src.checksum, s.genFileLimit(src.bytes), "generation "+src.path, alloc)
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

// cloneRow copies the strings of a rendered row, which alias its group's buffers.
func cloneRow(m map[string]any) map[string]any {
	for k, v := range m {
		if sv, ok := v.(string); ok {
			m[k] = strings.Clone(sv)
		}
	}
	return m
}
