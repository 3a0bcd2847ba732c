package store

import (
	"unsafe"

	"github.com/google/btree"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// memRow is one row version held in a memtable.
type memRow struct {
	row     Row
	seq     int64
	deleted bool
}

// memEntry is a memtable's newest version of one key, never changed once in an index.
type memEntry struct {
	key string
	r   memRow
}

// memtableDegree keeps a copy-on-write path copy after a reader's clone a few KiB.
const memtableDegree = 32

// memEntryBytes is what one indexed entry costs beyond its row's values.
var memEntryBytes = int64(unsafe.Sizeof(memEntry{})) + 16

// memtable holds the newest version of each key durable in the WAL but not yet sealed, in a
// B-tree; the active one changes under writer.mu, frozen ones never.
type memtable struct {
	index *btree.BTreeG[*memEntry]
	// view is a copy-on-write clone of index shared by the reads since the last add.
	view   *btree.BTreeG[*memEntry]
	maxPos uint64 // highest WAL position whose rows are all in this memtable
	// bytes estimates the memory the indexed versions hold.
	bytes int64
}

func newMemtable() *memtable {
	return &memtable{index: btree.NewG(memtableDegree, func(a, b *memEntry) bool { return a.key < b.key })}
}

// add makes r the newest version of its key, as WAL order is write order.
//
// REQUIRES: writer.mu held for the active memtable (or the memtable not shared yet).
func (m *memtable) add(r memRow) {
	m.bytes += addTo(m.index, r)
	m.view = nil
}

// addAll adds rows in order, all or none, into a clone of the index, so a panic midway leaves
// the memtable as it was.
//
// REQUIRES: as for add.
func (m *memtable) addAll(rows []memRow) {
	if len(rows) == 1 {
		m.add(rows[0]) // in or not, without the path copies that make a clone cost a lone row several adds
		return
	}
	index, bytes := m.index.Clone(), m.bytes
	for _, r := range rows {
		bytes += addTo(index, r)
	}
	m.index, m.bytes, m.view = index, bytes, nil
}

// addTo makes r the newest version of its key in index and returns what that adds to bytes.
func addTo(index *btree.BTreeG[*memEntry], r memRow) int64 {
	delta := memEntryBytes + rowcodec.DecodedValuesBytes(r.row)
	if old, ok := index.ReplaceOrInsert(&memEntry{key: r.row.Key, r: r}); ok {
		delta -= memEntryBytes + rowcodec.DecodedValuesBytes(old.r.row)
	}
	return delta
}

// len is the number of keys.
func (m *memtable) len() int { return m.index.Len() }

// get returns the newest version of key, or nil.
func (m *memtable) get(key string) *memRow {
	if e, ok := m.index.Get(&memEntry{key: key}); ok {
		return &e.r
	}
	return nil
}

// readView returns an index that later adds never change.
//
// REQUIRES: writer.mu held for the active memtable.
func (m *memtable) readView() *btree.BTreeG[*memEntry] {
	if m.view == nil {
		m.view = m.index.Clone()
	}
	return m.view
}

// newestRows returns the newest version of every key of frozen, sorted, as memIter reads them.
func newestRows(frozen []*memtable) (rows []Row, seqs []int64, deleted []bool) {
	trees := make([]*btree.BTreeG[*memEntry], len(frozen))
	n := 0
	for i, mt := range frozen {
		trees[i], n = mt.index, n+mt.len()
	}
	rows, seqs, deleted = make([]Row, 0, n), make([]int64, 0, n), make([]bool, 0, n)
	for it := newMemIter(trees, ""); it.peek() != nil; it.next() {
		e := it.peek()
		rows, seqs, deleted = append(rows, e.r.row), append(seqs, e.r.seq), append(deleted, e.r.deleted)
	}
	return rows, seqs, deleted
}

// memGet returns the newest local version of key across the frozen and active memtables
// (newest write sequence; of equal ones the older memtable's), in O(memtables × log n), or nil.
func (w *writer) memGet(key string) *memRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best *memRow
	for _, mt := range w.frozen {
		if r := mt.get(key); r != nil && (best == nil || r.seq > best.seq) {
			best = r
		}
	}
	if r := w.active.get(key); r != nil && (best == nil || r.seq > best.seq) {
		best = r
	}
	return best
}

// memIterAfter iterates the newest local version of every key above after across the
// memtables as they are now.
func (w *writer) memIterAfter(after string) *memIter {
	w.mu.Lock()
	trees := make([]*btree.BTreeG[*memEntry], 0, len(w.frozen)+1)
	for _, mt := range w.frozen {
		trees = append(trees, mt.index)
	}
	trees = append(trees, w.active.readView())
	w.mu.Unlock()
	return newMemIter(trees, after)
}
