package store

import (
	"sort"
)

// memRow is one row version held in a memtable.
type memRow struct {
	row     Row
	seq     int64
	deleted bool
}

// memtable holds rows that are durable in the WAL but not yet sealed.
type memtable struct {
	rows   []memRow
	newest map[string]int // key -> index of the newest version in rows
	maxPos uint64         // highest WAL position whose rows are all in this memtable
	bytes  int64
}

func newMemtable() *memtable { return &memtable{newest: map[string]int{}} }

func (m *memtable) add(r memRow) {
	m.rows = append(m.rows, r)
	m.newest[r.row.Key] = len(m.rows) - 1
	m.bytes += approxRowBytes(r.row)
}

func approxRowBytes(r Row) int64 {
	n := int64(len(r.Key)) + 24
	for _, v := range r.Values {
		switch x := v.(type) {
		case string:
			n += int64(len(x)) + 16
		case []byte:
			n += int64(len(x)) + 24
		default:
			n += 16
		}
	}
	return n
}

// newestSorted returns the newest version of every key, sorted by key.
func (m *memtable) newestSorted() ([]Row, []int64, []bool) {
	keys := make([]string, 0, len(m.newest))
	for k := range m.newest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([]Row, len(keys))
	seqs := make([]int64, len(keys))
	deleted := make([]bool, len(keys))
	for i, k := range keys {
		r := m.rows[m.newest[k]]
		rows[i], seqs[i], deleted[i] = r.row, r.seq, r.deleted
	}
	return rows, seqs, deleted
}

// snapshot returns the newest local version of every key across frozen and active
// memtables (for reads in this process).
func (w *writer) snapshot() map[string]memRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]memRow{}
	for _, mt := range append(append([]*memtable(nil), w.frozen...), w.active) {
		for k, i := range mt.newest {
			r := mt.rows[i]
			if old, ok := out[k]; !ok || r.seq > old.seq {
				out[k] = r
			}
		}
	}
	return out
}
