package backends

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/test/reliability"
)

// testStoreRoundTrip is a store's life on the backend through store.DB, the way a fleet
// lives it: two writer processes (two DB handles, two shards) append, overwrite each
// other's keys and delete, and seal generations; a third handle (the worker's) merges each
// pending shard with Prepare and Commit, as the MergeWal activities do, commits one of them
// a second time as a retried activity would; a fourth reads. The expectation is kept beside
// the writes in a plain map, independent of the store.
func testStoreRoundTrip(t *testing.T, root string) {
	ctx := testContext(t)
	w1 := openDB(t, root, "writer-1")
	w2 := openDB(t, root, "writer-2")
	target := store.Target{Kind: store.KindGeneric, Name: "round-trip"}
	seal := false
	s1, err := w1.Create(ctx, target, store.CreateOptions{Schema: &reliability.Schema, SealOnAppend: &seal})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	s2, err := w2.Open(ctx, target)
	if err != nil {
		t.Fatalf("Open from the second writer: %v", err)
	}

	want := map[string]int64{}
	put := func(s *store.Store, id string, n int64) {
		t.Helper()
		if _, err := s.Append(ctx, []store.Row{reliability.Row(id, n)}); err != nil {
			t.Fatalf("Append(%s): %v", id, err)
		}
		want[id] = n
	}
	del := func(s *store.Store, id string) {
		t.Helper()
		if err := s.Delete(ctx, id); err != nil {
			t.Fatalf("Delete(%s): %v", id, err)
		}
		delete(want, id)
	}
	flush := func(s *store.Store) {
		t.Helper()
		if _, err := s.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	for i := range 60 {
		put(s1, fmt.Sprintf("k%03d", i), int64(i))
		if i%20 == 19 {
			flush(s1) // three generations on shard 1
		}
	}
	put(s2, "k005", 5000) // a newer version of shard 1's key
	del(s2, "k007")       // and a delete of one
	put(s2, "x-only-2", 2)
	flush(s2)
	del(s1, "k010")
	put(s1, "k011", 1100)
	flush(s1)

	reader := openStore(t, openDB(t, root, "reader"), target)
	if got := readAll(t, reader, store.SourceAll); !maps.Equal(got, want) {
		t.Fatalf("before merge: read %v\nwant %v", got, want)
	}
	if got := readAll(t, reader, store.SourceBase); len(got) != 0 {
		t.Fatalf("before merge the base holds %d rows, want none", len(got))
	}

	merger := openStore(t, openDB(t, root, "merger"), target)
	pending, err := merger.PendingShards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("pending shards = %+v, want the two writers'", pending)
	}
	reclaimed := 0
	for _, sh := range pending {
		p, err := merger.Prepare(ctx, store.PrepareParams{Shard: sh.Shard, AttemptKey: "roundtrip-" + sh.Shard})
		if err != nil || p == nil {
			t.Fatalf("Prepare(%s) = %v, %v", sh.Shard, p, err)
		}
		res, err := merger.CommitRound(ctx, []*store.PreparedMerge{p})
		if err != nil || res.Shards[0].Outcome != store.RoundCommitted {
			t.Fatalf("CommitRound(%s) = %+v, %v", sh.Shard, res, err)
		}
		reclaimed += res.Shards[0].Reclaimed
		// A retried commit activity: safe, and it says so.
		again, err := merger.CommitRound(ctx, []*store.PreparedMerge{p})
		if err != nil || again.Shards[0].Outcome != store.RoundAlreadyCommitted {
			t.Fatalf("second CommitRound(%s) = %+v, %v; want already committed", sh.Shard, again, err)
		}
	}
	if reclaimed != 5 {
		t.Fatalf("merges reclaimed %d generations, want 5 (4 of writer 1, 1 of writer 2)", reclaimed)
	}
	if left, err := merger.PendingShards(ctx); err != nil || len(left) != 0 {
		t.Fatalf("after merging every shard, pending = %+v, %v", left, err)
	}
	for _, source := range []string{store.SourceAll, store.SourceBase} {
		if got := readAll(t, reader, source); !maps.Equal(got, want) {
			t.Fatalf("after merge, source %s: read %v\nwant %v", source, got, want)
		}
	}
	row, err := reader.Get(ctx, "k005")
	if v, verr := reliability.ValueOf(row); err != nil || verr != nil || v != 5000 || row["pad"] != reliability.Row("k005", 5000).Values[2] {
		t.Fatalf("Get(k005) = %v, %v; want the second writer's version", row, err)
	}
	if _, err := reader.Get(ctx, "k007"); err == nil {
		t.Fatal("Get(k007) after its delete was merged found a row")
	}

	// A process that opens the store afresh reads the same.
	if got := readAll(t, openStore(t, openDB(t, root, "late-reader"), target), store.SourceAll); !maps.Equal(got, want) {
		t.Fatalf("fresh handle: read %v\nwant %v", got, want)
	}
}

func openDB(t *testing.T, root, instance string) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.InstanceID = instance
	db, err := store.OpenDB(testContext(t), root, opts)
	if err != nil {
		t.Fatalf("OpenDB(%s): %v", root, err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

func openStore(t *testing.T, db *store.DB, target store.Target) *store.Store {
	t.Helper()
	s, err := db.Open(testContext(t), target)
	if err != nil {
		t.Fatalf("Open(%s): %v", target, err)
	}
	return s
}

// readAll lists every row of source in small pages (so paging is exercised) as id -> v.
func readAll(t *testing.T, s *store.Store, source string) map[string]int64 {
	t.Helper()
	rows, dups, err := reliability.ReadAll(testContext(t), s, source, 16)
	if err != nil || len(dups) > 0 {
		t.Fatalf("List(%s): %v; keys returned twice or out of order: %q", source, err, dups)
	}
	return rows
}
