package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/btree"
	"github.com/stretchr/testify/require"
)

// freezeActive moves s's active memtable to the frozen ones, as a seal does before it writes,
// so reads see several memtables with overlapping keys.
func freezeActive(t *testing.T, s *Store) {
	t.Helper()
	w := s.residentWriter()
	require.NotNil(t, w)
	w.mu.Lock()
	w.frozen = append(w.frozen, w.active)
	w.active = newMemtable()
	w.mu.Unlock()
}

// Reads over sealed generations, two frozen memtables and the active one return what a map
// of the newest value per key says, with both List paths (one merge over all sources, and
// the rounds of listBounded over more than readFanIn), and so does the seal of the memtables.
func TestMemtableReadsMatchAModel(t *testing.T) {
	// Each List page of limit 1 and each Get reads every generation: 250 keys, each written
	// four to six times among tombstones, mix versions as 500 did in half the reads.
	const modelKeys = 250
	for _, gens := range []int{2, readFanIn + 3} {
		t.Run(fmt.Sprintf("generations=%d", gens), func(t *testing.T) {
			ctx := context.Background()
			db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w")
			s := createGeneric(t, db, "model", false)
			rng := rand.New(rand.NewPCG(3, uint64(gens)))
			want := map[string]int64{}
			n := int64(0)
			write := func(rows int) {
				var batch []Row
				for range rows {
					k := fmt.Sprintf("k%04d", rng.IntN(modelKeys))
					n++
					batch = append(batch, row(k, n))
					want[k] = n
				}
				appendRows(t, s, batch...)
				for range rows / 8 {
					k := fmt.Sprintf("k%04d", rng.IntN(modelKeys))
					require.NoError(t, s.Delete(ctx, k))
					delete(want, k)
				}
			}
			for range gens {
				write(10)
				flush(t, s)
			}
			for m := range 3 {
				write(300)
				if m < 2 {
					freezeActive(t, s)
				}
			}
			check := func(what string) {
				for _, limit := range []int{1, 7, 100, 10000} {
					require.Equal(t, want, listInKeyOrder(t, s, limit), "%s: limit %d", what, limit)
				}
				for i := range modelKeys {
					k := fmt.Sprintf("k%04d", i)
					r, err := s.Get(ctx, k)
					if v, ok := want[k]; ok {
						require.NoError(t, err, "%s: %s", what, k)
						require.Equal(t, v, r["n"], "%s: %s", what, k)
					} else {
						require.ErrorIs(t, err, ErrNotFound, "%s: %s", what, k)
					}
				}
			}
			check("memtables")
			flush(t, s)
			check("sealed")
		})
	}
}

// The iterator over several memtables yields each key once, in order, from the cursor on,
// with the newest version, and the older memtable's on equal sequences.
func TestMemIterMergesMemtables(t *testing.T) {
	mk := func(entries ...memRow) *memtable {
		m := newMemtable()
		for _, e := range entries {
			m.add(e)
		}
		return m
	}
	r := func(k string, seq int64, del bool) memRow {
		return memRow{row: Row{Key: k, Values: []any{k, seq}}, seq: seq, deleted: del}
	}
	older := mk(r("a", 1, false), r("b", 5, false), r("d", 2, false), r("e", 7, false))
	newer := mk(r("b", 6, true), r("c", 3, false), r("d", 2, true), r("e", 4, false))
	// A key added twice to one memtable keeps the last version and counts its bytes once.
	older.add(r("a", 9, false))
	require.Equal(t, 4, older.len())
	require.Equal(t, mk(r("a", 9, false), r("b", 5, false), r("d", 2, false), r("e", 7, false)).bytes, older.bytes)

	walk := func(after string) []string {
		var out []string
		for it := newMemIter(trees(older, newer), after); it.peek() != nil; it.next() {
			e := it.peek()
			out = append(out, fmt.Sprintf("%s@%d/%v", e.key, e.r.seq, e.r.deleted))
		}
		return out
	}
	require.Equal(t, []string{"a@9/false", "b@6/true", "c@3/false", "d@2/false", "e@7/false"}, walk(""))
	require.Equal(t, []string{"c@3/false", "d@2/false", "e@7/false"}, walk("b"))
	require.Equal(t, []string{"c@3/false", "d@2/false", "e@7/false"}, walk("bb"))
	require.Empty(t, walk("e"))

	// Chunked fetching: a long walk crosses many chunks and misses nothing.
	big := newMemtable()
	for i := range 5000 {
		big.add(r(fmt.Sprintf("k%05d", i), int64(i), false))
	}
	it := newMemIter(trees(big), "k00100")
	for i := 101; i < 5000; i++ {
		require.Equal(t, fmt.Sprintf("k%05d", i), it.peek().key)
		it.next()
	}
	require.Nil(t, it.peek())
}

// A read's cost does not grow with the memtable: a Get and a List page allocate the same at
// 1,000 and at 100,000 unsealed rows (reading used to copy every key of the memtable).
func TestMemtableReadsDoNotAllocatePerRow(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://memallocs-%d", testURLSeq.Add(1)), "w")
	small := createGeneric(t, db, "small", false)
	big := createGeneric(t, db, "big", false)
	fillMemtable(t, small, 1000)
	fillMemtable(t, big, 100_000)
	get := func(s *Store) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, err := s.Get(ctx, "k0000500"); err != nil {
				t.Fatal(err)
			}
		})
	}
	list := func(s *Store) float64 {
		return testing.AllocsPerRun(20, func() {
			page, err := s.List(ctx, ListOptions{Limit: 10, After: "k0000400"})
			if err != nil || len(page.Rows) != 10 {
				t.Fatal(page, err)
			}
		})
	}
	// A little slack for the runtime's own allocations; a copy of the memtable is thousands.
	require.LessOrEqual(t, get(big), get(small)+4, "Get allocations grow with the memtable")
	require.LessOrEqual(t, list(big), list(small)+4, "List allocations grow with the memtable")
}

// Readers holding an iterator see the memtable as it was: appends after it do not change
// what they walk (the active memtable is read through a copy-on-write clone).
func TestMemIterIsASnapshot(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://memsnap-%d", testURLSeq.Add(1)), "w")
	s := createGeneric(t, db, "snap", false)
	appendRows(t, s, row("a", 1), row("c", 1))
	w := s.residentWriter()
	it := w.memIterAfter("")
	appendRows(t, s, row("b", 2), row("c", 2))
	var got []string
	for ; it.peek() != nil; it.next() {
		got = append(got, fmt.Sprintf("%s=%v", it.peek().key, it.peek().r.row.Values[1]))
	}
	require.Equal(t, []string{"a=1", "c=1"}, got)
	require.Equal(t, int64(2), call(s.Get(ctx, "c")).must(t)["n"])
	require.ErrorIs(t, errOf(s.Get(ctx, "zz")), ErrNotFound)
}

func trees(ms ...*memtable) []*btree.BTreeG[*memEntry] {
	out := make([]*btree.BTreeG[*memEntry], len(ms))
	for i, m := range ms {
		out[i] = m.index
	}
	return out
}
