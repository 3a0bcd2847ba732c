package store

import "github.com/google/btree"

// memIter walks memtable indexes as one key-ordered stream of newest versions, lazily, so a
// page of p rows costs O(log n + p).
type memIter struct {
	subs []*indexIter
	cur  *memEntry // the version at the iterator's position; nil once exhausted
}

// newMemIter positions an iterator on the first key above after.
//
// REQUIRES: nothing changes the trees while the iterator is used (frozen indexes and clones).
func newMemIter(trees []*btree.BTreeG[*memEntry], after string) *memIter {
	it := &memIter{subs: make([]*indexIter, 0, len(trees))}
	for _, t := range trees {
		if t.Len() > 0 {
			it.subs = append(it.subs, &indexIter{tree: t, last: after})
		}
	}
	it.next()
	return it
}

// peek is the version at the iterator's position (nil when exhausted or a nil iterator).
func (it *memIter) peek() *memEntry {
	if it == nil {
		return nil
	}
	return it.cur
}

// next moves to the next key.
func (it *memIter) next() {
	it.cur = nil
	for _, s := range it.subs {
		// The smallest key, and of equal keys the newest version.
		if e := s.head(); e != nil && (it.cur == nil || e.key < it.cur.key ||
			e.key == it.cur.key && e.r.seq > it.cur.r.seq) {
			it.cur = e
		}
	}
	if it.cur == nil {
		return
	}
	for _, s := range it.subs {
		if e := s.head(); e != nil && e.key == it.cur.key {
			s.i++
		}
	}
}

// indexIter pulls from one index in chunks, each one O(log n) descent of a push walk.
type indexIter struct {
	tree  *btree.BTreeG[*memEntry]
	buf   []*memEntry
	i     int
	last  string // entries above this key are still to fetch
	chunk int
	done  bool // the tree has nothing above last
}

// Chunk bounds: a short page fetches little, a long scan descends once per maxIndexChunk.
const (
	minIndexChunk = 32
	maxIndexChunk = 1024
)

// head is the entry at the position (nil when exhausted).
func (s *indexIter) head() *memEntry {
	if s.i == len(s.buf) {
		s.fill()
	}
	if s.i == len(s.buf) {
		return nil
	}
	return s.buf[s.i]
}

// fill fetches the next chunk of entries above last.
func (s *indexIter) fill() {
	if s.done {
		return
	}
	s.chunk = min(max(2*s.chunk, minIndexChunk), maxIndexChunk)
	clear(s.buf)
	s.buf, s.i = s.buf[:0], 0
	last := s.last
	s.tree.AscendGreaterOrEqual(&memEntry{key: last}, func(e *memEntry) bool {
		if e.key == last {
			return true
		}
		s.buf = append(s.buf, e)
		return len(s.buf) < s.chunk
	})
	if len(s.buf) < s.chunk {
		s.done = true
	}
	if len(s.buf) > 0 {
		s.last = s.buf[len(s.buf)-1].key
	}
}
