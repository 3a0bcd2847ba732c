package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// streamedRunStore writes rows rows (keys k000000, k000002, ...: every other key, so that
// generations can add keys between them; each with a value of pad bytes more than its key,
// which sets how many rows a streamed batch holds) merged into one base run, rewrites that
// run in row groups of groupRows rows, and puts gens pending generations on top of it
// (addPendingGenerations). The store (db) reads with the cache off and the read budget rb,
// so its Lists stream the run; ref is a second handle on the same storage whose cache keeps
// the run, so its Lists decode the run whole.
func streamedRunStore(t *testing.T, rows, pad, groupRows, gens int, rb *Budget) (s, ref *Store, m *Metrics) {
	t.Helper()
	ctx := context.Background()
	url := "file://" + t.TempDir() + "?nosync=1"
	m = NewMetrics(prometheus.NewRegistry(), nil)
	db := openTestDB(t, url, "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 1 // keeps nothing: the run and the generations are read privately
		o.Metrics = m
	})
	s = createGeneric(t, db, "liststream", false)
	padding := strings.Repeat("p", pad)
	var rs []Row
	for i := 0; i < rows; i++ {
		k := fmt.Sprintf("k%06d", 2*i)
		rs = append(rs, keyRow(k, int64(i), padding+k))
	}
	seal(t, s, rs...)
	call(s.MergeAll(ctx)).must(t)
	splitRunRowGroups(t, s, int64(groupRows))
	return s, addPendingGenerations(t, s, rows, 0, gens), m
}

// addPendingGenerations puts n more pending generations, numbered from from, on top of the
// base of a streamedRunStore of rows rows (updates, tombstones and new keys, nothing left in
// the memtable), and returns a new handle on its storage whose cache keeps the run.
func addPendingGenerations(t *testing.T, s *Store, rows, from, n int) (ref *Store) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 17+uint64(from)))
	for g := from; g < from+n; g++ {
		var batch []Row
		for range 40 {
			k := fmt.Sprintf("k%06d", rng.IntN(2*rows+20)) // base keys, keys between them, past the end
			batch = append(batch, keyRow(k, int64(1_000_000+g), fmt.Sprintf("gen%d", g)))
		}
		appendRows(t, s, batch...)
		for range 5 {
			require.NoError(t, s.Delete(ctx, fmt.Sprintf("k%06d", rng.IntN(2*rows))))
		}
		flush(t, s)
	}
	st := call(s.Stats(ctx)).must(t)
	require.Equal(t, 1, st.Runs)
	if from+n > 0 {
		require.Equal(t, from+n, st.Shards[0].PendingGenerations)
	}

	refDB := openTestDB(t, s.db.bucket.URL(), fmt.Sprintf("w%d", 2+from), func(o *Options) { o.CacheBytes = 1 << 30 })
	return openGeneric(t, refDB, "liststream")
}

// splitRunRowGroups rewrites every base run of s in row groups of groupRows rows (merges
// write row groups of about 8 MiB) under a new path, and publishes the base version that
// lists the rewritten runs.
func splitRunRowGroups(t *testing.T, s *Store, groupRows int64) {
	t.Helper()
	ctx := context.Background()
	next := call(s.loadBase(ctx)).must(t).Next("test: small row groups")
	for i, r := range next.Runs {
		f := call(decodeParquet(ctx, getObject(t, s.db.bucket, r.Path), s.codec, r.Path)).must(t)
		rec := f.rec
		var parts []arrow.RecordBatch
		for off := int64(0); off < rec.NumRows(); off += groupRows {
			parts = append(parts, rec.NewSlice(off, min(off+groupRows, rec.NumRows())))
		}
		rec.Release()
		var buf bytes.Buffer
		require.NoError(t, writeParquetRecs(&buf, s.codec.ArrowSchema(), parts...))
		r.Path = strings.TrimSuffix(r.Path, ".parquet") + "-small-row-groups.parquet"
		r.Bytes, r.Checksum = int64(buf.Len()), checksumOf(buf.Bytes())
		require.NoError(t, s.db.bucket.Put(ctx, r.Path, buf.Bytes()))
		next.Runs[i] = r
	}
	require.NoError(t, s.publishBase(ctx, next))
	rb := firstRunBatches(t, s)
	require.Equal(t, int((rb.rows+groupRows-1)/groupRows), rb.pf.NumRowGroups())
}

// firstRunBatches opens s's first base run for streamed batches, as a List does (closed with
// the test).
func firstRunBatches(t *testing.T, s *Store) *runBatches {
	t.Helper()
	ctx := context.Background()
	rb := call(openRunBatches(ctx, nil, getObject(t, s.db.bucket, call(s.loadBase(ctx)).must(t).Runs[0].Path), s.codec, "run")).must(t)
	t.Cleanup(rb.close)
	return rb
}

// listAll pages through s from after with limit, returning every page; paging must end
// within 2000 pages.
func listAll(t *testing.T, s *Store, after string, limit int) []ListPage {
	t.Helper()
	var pages []ListPage
	for {
		page := call(s.List(context.Background(), ListOptions{Limit: limit, After: after})).must(t)
		pages = append(pages, page)
		if page.Next == "" {
			return pages
		}
		after = page.Next
		require.Less(t, len(pages), 2000, "paging does not end")
	}
}

// listInKeyOrder lists every row of s in pages of limit as id -> n, requiring the keys in
// strictly ascending order across the pages.
func listInKeyOrder(t *testing.T, s *Store, limit int) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	prev := ""
	for _, page := range listAll(t, s, "", limit) {
		for _, r := range page.Rows {
			k := r["id"].(string)
			require.Greater(t, k, prev, "key order")
			prev = k
			got[k] = r["n"].(int64)
		}
	}
	return got
}

// A List over a base run of many row groups that the cache does not keep, streamed a batch
// at a time, returns exactly what the whole decode returns (a second handle whose cache keeps
// the run), page by page to the end: newest version across the run and the pending
// generations, tombstones hidden, pages continuing after their cursor; with the sources in
// one group and in more than readFanIn (listBounded, whose candidates from the run are
// rendered before its batch is released). Every byte goes back to the read budget.
func TestListStreamsBaseRunsAsTheWholeDecode(t *testing.T) {
	const rows = 2000
	rb := NewBudget(64 << 20)
	// Rows of about 1 KiB: batches of about 900 rows, so the run's 20 row groups of 100 rows
	// stream in three batches, each boundary inside a row group, in few pages. The two cases
	// share the run: the second adds generations to the first's.
	s, ref, _ := streamedRunStore(t, rows, 1000, 100, 6, rb)
	batchRows := firstRunBatches(t, s).batchRows
	require.Less(t, 2*batchRows, int64(rows), "the run streams in three batches or more")
	require.NotZero(t, batchRows%100, "a batch ends inside a row group")
	for _, tc := range []struct {
		name string
		gens int
	}{{"one group", 6}, {"bounded", readFanIn + 6}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gens > 6 {
				ref = addPendingGenerations(t, s, rows, 6, tc.gens-6)
			}
			// 97 rows a page: pages start at many offsets inside the 100-row groups.
			for _, limit := range []int{97, 1000} {
				want := listAll(t, ref, "", limit)
				got := listAll(t, s, "", limit)
				require.Equal(t, len(want), len(got), "pages of %d", limit)
				for i := range want {
					require.Equal(t, want[i], got[i], "page %d of %d rows", i, limit)
				}
			}
			// Cursors anywhere: on a key, between keys, before the first, past the last.
			for _, after := range []string{"k000000", "k001201", "k002777", "k003998", "a", "k999999"} {
				want := call(ref.List(context.Background(), ListOptions{Limit: 100, After: after})).must(t)
				got := call(s.List(context.Background(), ListOptions{Limit: 100, After: after})).must(t)
				require.Equal(t, want, got, "after %q", after)
			}
			require.Zero(t, rb.Reserved())
			require.Zero(t, rb.Allocated(), "every buffer of the lists went back")
			require.LessOrEqual(t, rb.Pooled(), rb.Limit())
		})
	}
}

// A List page of 100 rows decodes the batch that holds its first keys and no more of the
// run: far fewer rows than the run holds, whether it starts at the first row group or at one
// in the middle (picked by the key statistics), and only rows of the run at or after that
// row group.
func TestListPageDecodesOnlyTheRowGroupsItNeeds(t *testing.T) {
	ctx := context.Background()
	const rows = 60000
	rb := NewBudget(64 << 20)
	s, ref, m := streamedRunStore(t, rows, 100, 500, 2, rb)
	first := firstRunBatches(t, s)
	batchRows, groups := first.batchRows, first.pf.NumRowGroups()
	require.Greater(t, groups, 100)

	for _, after := range []string{"", "k060001", "k119000"} {
		before := testutil.ToFloat64(m.ReadRunRowsDecoded)
		got := call(s.List(ctx, ListOptions{Limit: 100, After: after})).must(t)
		decoded := int64(testutil.ToFloat64(m.ReadRunRowsDecoded) - before)
		require.Equal(t, call(ref.List(ctx, ListOptions{Limit: 100, After: after})).must(t), got)
		require.Len(t, got.Rows, 100)
		t.Logf("after %q: decoded %d of the run's %d rows (%d row groups of 500; batches of %d rows)",
			after, decoded, rows, groups, batchRows)
		require.Positive(t, decoded)
		// One batch holds the page; a second at most where the page crosses a batch.
		require.LessOrEqual(t, decoded, 2*batchRows, "after %q", after)
		require.Less(t, decoded*10, int64(rows), "after %q: a page decodes a small part of the run", after)
	}
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}

// Concurrent Lists over a streamed run share the read budget and keep their allocations
// within their reservations: in the race-detector build the allocator panics on an
// allocation beyond a reservation that does not hold the whole budget (allocCheck), and in
// every build such an allocation fails the read with ErrBudgetBusy; so every List succeeds,
// returns what the whole decode returns, and gives every byte back.
func TestListOverStreamedRunsStaysWithinItsReservation(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(48 << 20) // several groups at once, never one holding the whole budget
	s, ref, _ := streamedRunStore(t, 20000, 100, 300, 4, rb)
	afters := []string{"", "k010001", "k020000", "k030003", "k039990", "k000777"}
	want := make([]ListPage, len(afters))
	for i, after := range afters {
		want[i] = call(ref.List(ctx, ListOptions{Limit: 500, After: after})).must(t)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4*len(afters))
	pages := make([]ListPage, len(errs))
	for w := range errs {
		wg.Go(func() {
			// A List the budget cannot admit within readBudgetWait answers busy, as designed;
			// on a loaded machine 24 of them can queue that long, so such a List is asked
			// again, as a client would. An allocation beyond a reservation is never retried.
			for range 3 {
				pages[w], errs[w] = s.List(ctx, ListOptions{Limit: 500, After: afters[w%len(afters)]})
				if !errors.Is(errs[w], errReadBudgetWait) {
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range errs {
		require.NoError(t, errs[w])
		require.Equal(t, want[w%len(afters)], pages[w])
	}
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated(), "every buffer of the lists went back")
	require.LessOrEqual(t, rb.Pooled(), rb.Limit())
}
