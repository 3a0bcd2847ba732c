package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// fillMemtable puts n rows k0000000.. into the active memtable of s's writer directly (not
// through the WAL): reads are what is measured, and a million appends would dominate.
func fillMemtable(tb testing.TB, s *Store, n int) {
	tb.Helper()
	w, err := s.writer(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%07d", i)
		w.active.add(memRow{row: row(k, int64(i)), seq: w.nextSeqLocked()})
	}
}

// memtableSizes are the unsealed row counts the memtable read benchmarks compare: a read
// should cost about the same at each.
var memtableSizes = []int{0, 1000, 100_000, 1_000_000}

// BenchmarkMemtableGet: one Get of a key in the middle of n unsealed rows (not found at 0).
func BenchmarkMemtableGet(b *testing.B) {
	for _, n := range memtableSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			db, _ := benchDBAt(b, fmt.Sprintf("mem://bench-memget-%d-%d", n, testURLSeq.Add(1)))
			s := createGeneric(b, db, "memget", false)
			fillMemtable(b, s, n)
			key := fmt.Sprintf("k%07d", n/2)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Get(ctx, key); err != nil && (n > 0 || !errors.Is(err, ErrNotFound)) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemtableList: one List page of 100 from a cursor in the middle of n unsealed rows.
func BenchmarkMemtableList(b *testing.B) {
	for _, n := range memtableSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			db, _ := benchDBAt(b, fmt.Sprintf("mem://bench-memlist-%d-%d", n, testURLSeq.Add(1)))
			s := createGeneric(b, db, "memlist", false)
			fillMemtable(b, s, n)
			after := fmt.Sprintf("k%07d", n/2)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				page, err := s.List(ctx, ListOptions{Limit: 100, After: after})
				if err != nil {
					b.Fatal(err)
				}
				if want := min(100, max(n-n/2-1, 0)); len(page.Rows) != want {
					b.Fatalf("page of %d rows, want %d", len(page.Rows), want)
				}
			}
		})
	}
}

// BenchmarkMemtableAddBatch: one batch of rows added to a memtable already holding n rows,
// through addAll (into a copy-on-write clone, all or none) and through one add per row, side
// by side: the clone must cost the group commit little against the adds themselves.
func BenchmarkMemtableAddBatch(b *testing.B) {
	for _, n := range []int{1000, 100_000, 1_000_000} {
		for _, batch := range []int{2, 64, 1024} {
			m := newMemtable()
			for i := 0; i < n; i++ {
				m.add(memRow{row: row(fmt.Sprintf("k%07d", 2*i), int64(i))})
			}
			rows := make([]memRow, batch)
			for i := range rows {
				rows[i] = memRow{row: row(fmt.Sprintf("k%07d", 2*(i*n/batch)+1), int64(i))}
			}
			for _, how := range []string{"addAll", "add"} {
				b.Run(fmt.Sprintf("rows=%d/batch=%d/%s", n, batch, how), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						// Each iteration adds into its own clone of the filled memtable, so the
						// rows are new keys every time, as a group commit's mostly are.
						b.StopTimer()
						into := &memtable{index: m.index.Clone(), bytes: m.bytes}
						b.StartTimer()
						if how == "addAll" {
							into.addAll(rows)
							continue
						}
						for _, r := range rows {
							into.add(r)
						}
					}
				})
			}
		}
	}
}
