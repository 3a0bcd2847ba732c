package store

import "container/heap"

// The one k-way merge of the package. Reads (List), merges (Prepare) and compaction
// (CompactBase) all walk sorted, key-unique sources as one key-ordered stream and keep, per
// key, the newest version; they differ only in their sources and in what they do with the
// winner, so the heap and the rule that picks the winner live here once.

// cursor is one sorted source of a merge, positioned at row i: a decoded file (a generation
// or a base run) or a sorted snapshot of this process's memtable.
type cursor struct {
	file *sortedFile
	i    int
	mem  []memEntry
	// memShard is the shard id of the memtable's rows (mem cursors only).
	memShard string
	// refill, if set, moves an exhausted file cursor to the next batch of its source (a base
	// run read in batches) and reports whether there was one (file cursors only).
	refill func(c *cursor) bool
}

type memEntry struct {
	key string
	r   memRow
}

func (c *cursor) done() bool {
	if c.file != nil {
		return c.i >= c.file.n
	}
	return c.i >= len(c.mem)
}

func (c *cursor) key() string {
	if c.file != nil {
		return c.file.view.Key(c.i)
	}
	return c.mem[c.i].key
}

// seqAt and shardAt are the write sequence and shard id of row i of the cursor's source:
// the two fields newer ranks versions by.
func (c *cursor) seqAt(i int) int64 {
	if c.file != nil {
		return c.file.view.Seq(i)
	}
	return c.mem[i].r.seq
}

func (c *cursor) shardAt(i int) string {
	if c.file != nil {
		return c.file.view.Shard(i)
	}
	return c.memShard
}

// versionAt is row i of the cursor's source as a read's candidate version.
func (c *cursor) versionAt(i int) version {
	if c.file != nil {
		v := c.file.view
		return version{key: v.Key(i), seq: v.Seq(i), shard: v.Shard(i), deleted: v.Deleted(i), file: c.file, row: i}
	}
	e := c.mem[i]
	return version{key: e.key, seq: e.r.seq, shard: c.memShard, deleted: e.r.deleted, mem: e.r.row}
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
// cursors (newer: write sequence, then shard id).
//
// REQUIRES: every cursor's source is sorted by key with each key at most once.
type mergeIter struct {
	h cursorHeap
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

// more reports whether a key is left.
func (it *mergeIter) more() bool { return it.h.Len() > 0 }

// next returns the cursor and row that hold the newest version of the smallest key left,
// and advances every cursor past that key. ok is false when no key is left.
//
// INVARIANT: of equal (seq, shard) versions the first one popped wins, so a tie resolves
// the same way in reads, merges and compaction.
func (it *mergeIter) next() (c *cursor, row int, ok bool) {
	if it.h.Len() == 0 {
		return nil, 0, false
	}
	key := it.h[0].key()
	for it.h.Len() > 0 && it.h[0].key() == key {
		top := it.h[0]
		if c == nil || newer(top.seqAt(top.i), top.shardAt(top.i), c.seqAt(row), c.shardAt(row)) {
			c, row = top, top.i
		}
		top.i++
		if top.done() {
			heap.Pop(&it.h)
		} else {
			heap.Fix(&it.h, 0)
		}
	}
	return c, row, true
}

// nextFile is next for merges of file cursors only, some of which may refill (runs read in
// batches): it returns the batch that holds the newest version of the smallest key left,
// which the winning cursor may have moved past by the time it returns.
//
// REQUIRES: a batch a cursor moved past stays valid until the caller is done with its rows,
// and the first row of a refilled batch has a key above the last of the batch before.
func (it *mergeIter) nextFile() (f *sortedFile, row int, ok bool) {
	if it.h.Len() == 0 {
		return nil, 0, false
	}
	key := it.h[0].key()
	for it.h.Len() > 0 && it.h[0].key() == key {
		top := it.h[0]
		if f == nil || newer(top.file.view.Seq(top.i), top.file.view.Shard(top.i), f.view.Seq(row), f.view.Shard(row)) {
			f, row = top.file, top.i
		}
		top.i++
		if top.done() && (top.refill == nil || !top.refill(top)) {
			heap.Pop(&it.h)
		} else {
			heap.Fix(&it.h, 0)
		}
	}
	return f, row, true
}

// pick is one surviving row version chosen by mergeSorted.
type pick struct {
	f *sortedFile
	i int
}

func (p pick) key() string { return p.f.view.Key(p.i) }
func (p pick) seq() int64  { return p.f.view.Seq(p.i) }

// mergeSorted walks sorted, key-unique files as one stream and keeps, per key, the newest
// version. drop, if set, discards a surviving version (compaction uses it to drop
// tombstones). The result is in key order.
func mergeSorted(files []*sortedFile, drop func(f *sortedFile, i int) bool) []pick {
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
		c, i, ok := it.next()
		if !ok {
			return out
		}
		if drop != nil && drop(c.file, i) {
			continue
		}
		out = append(out, pick{c.file, i})
	}
}
