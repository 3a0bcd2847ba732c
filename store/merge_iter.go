package store

import "container/heap"

// The one k-way merge of the package: reads, merges and compaction all walk sorted,
// key-unique sources as one stream keeping the newest version per key, so the heap and the
// rule that picks the winner live here once.

// cursor is one sorted source of a merge, positioned at row i: a decoded file (a generation
// or a base run) or this process's memtables (memIter).
type cursor struct {
	file *sortedFile
	i    int
	mem  *memIter
	// memShard is the shard id of the memtable's rows (mem cursors only).
	memShard string
	// refill, if set, moves an exhausted file cursor to the next batch of its source (a base
	// run read in batches) and reports whether there was one (file cursors only). rest, if
	// set, reports without decoding whether the source has rows beyond the current batch.
	refill func(c *cursor) bool
	rest   func() bool
}

func (c *cursor) done() bool {
	if c.file != nil {
		return c.i >= c.file.n
	}
	return c.mem.peek() == nil
}

func (c *cursor) key() string {
	if c.file != nil {
		return c.file.view.Key(c.i)
	}
	return c.mem.peek().key
}

// at is the cursor's current row as a hit.
func (c *cursor) at() hit {
	if c.file != nil {
		return hit{c: c, f: c.file, i: c.i}
	}
	return hit{c: c, m: c.mem.peek()}
}

// advance moves the cursor past its current row.
func (c *cursor) advance() {
	if c.file != nil {
		c.i++
		return
	}
	c.mem.next()
}

// hit is the row version next picked: its cursor, and the file (f) and row, or memtable entry
// (m), that hold it, kept apart since a refilling cursor moves to its next batch.
type hit struct {
	c *cursor
	f *sortedFile
	i int
	m *memEntry
}

func (h hit) seq() int64 {
	if h.f != nil {
		return h.f.view.Seq(h.i)
	}
	return h.m.r.seq
}

func (h hit) shard() string {
	if h.f != nil {
		return h.f.view.Shard(h.i)
	}
	return h.c.memShard
}

// version is the hit as a read's candidate version.
func (h hit) version() version {
	if h.f != nil {
		v := h.f.view
		return version{key: v.Key(h.i), seq: v.Seq(h.i), shard: v.Shard(h.i), deleted: v.Deleted(h.i), file: h.f, row: h.i}
	}
	return version{key: h.m.key, seq: h.m.r.seq, shard: h.c.memShard, deleted: h.m.r.deleted, mem: h.m.r.row}
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return h[i].key() < h[j].key() }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// mergeIter yields, key by key in ascending order, the newest version of each key over its
// cursors (newer: write sequence, then shard id). A cursor with refill is refilled at the
// start of the next call to next, so a read never decodes a batch it does not use and the
// returned hit's batch stays valid while the caller copies from it.
//
// REQUIRES: every cursor's source is sorted by key with each key at most once, and the first
// row of a refilled batch has a key above the last of the batch before.
type mergeIter struct {
	h cursorHeap
	// pending are the refilling cursors that ran out of rows, to refill on the next call.
	pending []*cursor
}

// newMergeIter merges cursors; exhausted ones are dropped. The cursors are advanced in place.
func newMergeIter(cursors []*cursor) *mergeIter {
	it := &mergeIter{h: make(cursorHeap, 0, len(cursors))}
	for _, c := range cursors {
		if !c.done() {
			it.h = append(it.h, c)
		}
	}
	heap.Init(&it.h)
	return it
}

// more reports whether a key is left. A pending cursor counts when its rest says its source
// has rows beyond its batch (without decoding them), or has no rest to ask.
func (it *mergeIter) more() bool {
	if it.h.Len() > 0 {
		return true
	}
	for _, c := range it.pending {
		if c.rest == nil || c.rest() {
			return true
		}
	}
	return false
}

// next returns the newest version of the smallest key left, and advances every cursor past
// that key. ok is false when no key is left.
//
// INVARIANT: of equal (seq, shard) versions the first one popped wins, so a tie resolves
// the same way in reads, merges and compaction.
func (it *mergeIter) next() (h hit, ok bool) {
	for _, c := range it.pending {
		if c.refill(c) {
			heap.Push(&it.h, c)
		}
	}
	clear(it.pending)
	it.pending = it.pending[:0]
	if it.h.Len() == 0 {
		return hit{}, false
	}
	key := it.h[0].key()
	for it.h.Len() > 0 && it.h[0].key() == key {
		top := it.h[0]
		if at := top.at(); !ok || newer(at.seq(), at.shard(), h.seq(), h.shard()) {
			h, ok = at, true
		}
		top.advance()
		if !top.done() {
			heap.Fix(&it.h, 0)
			continue
		}
		heap.Pop(&it.h)
		if top.refill != nil {
			it.pending = append(it.pending, top)
		}
	}
	return h, true
}

// pick is one surviving row version chosen by mergeSorted.
type pick struct {
	f *sortedFile
	i int
}

func (p pick) key() string { return p.f.view.Key(p.i) }

// mergeSorted walks sorted, key-unique files as one stream and keeps, per key, the newest
// version in key order, tombstones included (older runs may hold the key).
func mergeSorted(files []*sortedFile) []pick {
	cursors := make([]*cursor, 0, len(files))
	total := 0
	for _, f := range files {
		if f.n > 0 {
			cursors = append(cursors, &cursor{file: f})
			total += f.n
		}
	}
	it := newMergeIter(cursors)
	out := make([]pick, 0, total)
	for {
		h, ok := it.next()
		if !ok {
			return out
		}
		out = append(out, pick{h.f, h.i})
	}
}
