package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

var testSchema = Schema{Fields: []Field{
	{Name: "id", Type: "string"},
	{Name: "n", Type: "int64", Nullable: true},
	{Name: "s", Type: "string", Nullable: true},
}}

var testURLSeq atomic.Int64

// backends returns a fresh file:// and mem:// storage URL for table tests.
func backends(t *testing.T) map[string]string {
	return map[string]string{
		"file": "file://" + t.TempDir(),
		"mem":  fmt.Sprintf("mem://test-%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), testURLSeq.Add(1)),
	}
}

func openTestDB(t testing.TB, url, instance string, tweak ...func(*Options)) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.InstanceID = instance
	for _, f := range tweak {
		f(&opts)
	}
	db := call(OpenDB(context.Background(), url, opts)).must(t)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// aheadClock sets Options.Now to the machine's clock plus *ahead, which a test moves.
func aheadClock(ahead *atomic.Int64) func(*Options) {
	return func(o *Options) { o.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) } }
}

func createGeneric(t testing.TB, db *DB, name string, seal bool) *Store {
	t.Helper()
	return call(db.Create(context.Background(), Target{Kind: KindGeneric, Name: name}, CreateOptions{Schema: &testSchema, SealOnAppend: &seal})).must(t)
}

// newGenericStore opens a DB for the instance "w1" on url and creates the generic store name
// (testSchema, no seal on append) in it.
func newGenericStore(t *testing.T, url, name string, tweak ...func(*Options)) (*DB, *Store) {
	t.Helper()
	db := openTestDB(t, url, "w1", tweak...)
	return db, createGeneric(t, db, name, false)
}

// shardStores opens n DBs on url, instances w0..w<n-1>, as one writer process per shard, and
// the generic store name in each: created by the first, opened by the others.
func shardStores(t *testing.T, url, name string, n int, tweak ...func(*Options)) []*Store {
	t.Helper()
	stores := []*Store{createGeneric(t, openTestDB(t, url, "w0", tweak...), name, false)}
	for i := 1; i < n; i++ {
		stores = append(stores, openGeneric(t, openTestDB(t, url, fmt.Sprintf("w%d", i), tweak...), name))
	}
	return stores
}

// twoPrepares creates the generic store name on a fresh file:// DB, seals four generations
// and prepares them twice, as two attempts racing on one pass.
func twoPrepares(t *testing.T, name string) (db *DB, s *Store, p1, p2 *PreparedMerge) {
	t.Helper()
	db, s = newGenericStore(t, "file://"+t.TempDir(), name)
	sealGenerations(t, s, 4)
	p1 = call(s.Prepare(context.Background(), PrepareParams{AttemptKey: "wf-1/act-1"})).must(t)
	p2 = call(s.Prepare(context.Background(), PrepareParams{AttemptKey: "wf-2/act-1"})).must(t)
	return db, s, p1, p2
}

// onStorage reports whether key exists in b.
func onStorage(t *testing.T, b *objstore.Bucket, key string) bool {
	t.Helper()
	return call(b.Exists(context.Background(), key)).must(t)
}

// failOn returns faults that fail every operation match picks, before it runs, with err.
func failOn(err error, match func(op, key string) bool) objstore.FaultFuncs {
	return objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if match(op, key) {
			return err
		}
		return nil
	}}
}

func openGeneric(t testing.TB, db *DB, name string) *Store {
	t.Helper()
	return call(db.Open(context.Background(), Target{Kind: KindGeneric, Name: name})).must(t)
}

func row(id string, n int64) Row { return keyRow(id, n, nil) }

// keyRow is the row of key id with the values id, n and s, as testSchema and its likes hold them.
func keyRow(id string, n int64, s any) Row { return Row{Key: id, Values: []any{id, n, s}} }

// appendRows appends rows, in as few appends as Options.MaxAppendRows allows.
func appendRows(t testing.TB, s *Store, rows ...Row) {
	t.Helper()
	per := len(rows)
	if m := s.db.opts.MaxAppendRows; m > 0 {
		per = m
	}
	for len(rows) > 0 {
		n := min(per, len(rows))
		call(s.Append(context.Background(), rows[:n])).must(t)
		rows = rows[n:]
	}
}

// deleteKeys writes a tombstone for each key in one WAL write, as Delete does for one.
func deleteKeys(t *testing.T, s *Store, keys ...string) {
	t.Helper()
	rows := make([]Row, len(keys))
	for i, k := range keys {
		rows[i] = Row{Key: k, Values: make([]any, len(s.meta.Schema.Fields))}
		rows[i].Values[s.codec.KeyIndex()] = k
	}
	require.NoError(t, errOf(s.submit(context.Background(), rows, rowcodec.DecodedRowsBytes(rows), true)))
}

func flush(t testing.TB, s *Store) FlushResult {
	t.Helper()
	res, err := s.Flush(context.Background())
	require.NoError(t, err)
	return res
}

// seal appends rows to s and seals them into one generation.
func seal(t testing.TB, s *Store, rows ...Row) {
	t.Helper()
	appendRows(t, s, rows...)
	flush(t, s)
}

// sealGenerations seals n generations of one row each, k<i> = i for i in [0, n).
func sealGenerations(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
}

// allRows lists every row (all pages) as id -> n.
func allRows(t *testing.T, s *Store, source string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	after := ""
	for {
		page := call(s.List(context.Background(), ListOptions{Source: source, Limit: 7, After: after})).must(t)
		for _, r := range page.Rows {
			id := r["id"].(string)
			_, dup := out[id]
			require.False(t, dup, "key %s listed twice", id)
			out[id] = toInt64(r["n"])
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case nil:
		return -1
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func pendingOf(t *testing.T, s *Store, shard string) int {
	t.Helper()
	st := call(s.Stats(context.Background())).must(t)
	for _, sh := range st.Shards {
		if sh.Shard == shard {
			return sh.PendingGenerations
		}
	}
	return 0
}

// genFilesOnDisk lists generation objects of a shard.
func genFilesOnDisk(t *testing.T, s *Store, shard string) []string {
	t.Helper()
	objs, err := s.db.bucket.List(context.Background(), genPrefix(s.target, shard))
	require.NoError(t, err)
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

func listedGens(t *testing.T, s *Store, shard string) []string {
	t.Helper()
	m := call(s.loadShard(context.Background(), shard)).must(t)
	var out []string
	if m != nil {
		for _, g := range m.Flushed {
			out = append(out, g.Path)
		}
	}
	sort.Strings(out)
	return out
}

func TestAppendFlushReadMergeOnEveryBackend(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, s := newGenericStore(t, url, "basic")
			appendRows(t, s, row("a", 1), row("b", 2))
			// Visible to its own process before the seal.
			require.EqualValues(t, 1, toInt64(call(s.Get(ctx, "a")).must(t)["n"]))

			// Not visible to another process until sealed.
			other := openTestDB(t, url, "reader")
			so := openGeneric(t, other, "basic")
			require.ErrorIs(t, errOf(so.Get(ctx, "a")), ErrNotFound)

			res := flush(t, s)
			require.True(t, res.Sealed)
			require.Equal(t, 1, res.Pending)
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, so, SourceAll))
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, so, SourceWAL))
			require.Empty(t, allRows(t, so, SourceBase))

			require.Equal(t, 1, call(s.MergeAll(ctx)).must(t))
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, so, SourceBase))
			require.Empty(t, allRows(t, so, SourceWAL))
			require.Equal(t, 0, pendingOf(t, so, db.Shard()))

			require.NoError(t, s.Delete(ctx, "a"))
			flush(t, s)
			require.ErrorIs(t, errOf(so.Get(ctx, "a")), ErrNotFound)
			require.Equal(t, map[string]int64{"b": 2}, allRows(t, so, SourceAll))
		})
	}
}

// After merges, the generation files on disk are exactly the ones the manifest still lists.
func TestMergedGenerationFilesAreDeleted(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, s := newGenericStore(t, url, "leak")
			for i := 0; i < 30; i++ {
				seal(t, s, row(fmt.Sprintf("k%02d", i), int64(i)))
				if (i+1)%10 == 0 {
					call(s.MergeAll(ctx)).must(t)
				}
				require.Equal(t, listedGens(t, s, db.Shard()), genFilesOnDisk(t, s, db.Shard()))
			}
			rows := allRows(t, s, SourceAll)
			require.Len(t, rows, 30)
			require.Empty(t, genFilesOnDisk(t, s, db.Shard()))
		})
	}
}

// A merge pass is bounded by its byte cap or its generation cap, whichever binds first; an
// oversized first generation merges whole; the leftovers of a pass survive it and stay readable.
func TestMergeCaps(t *testing.T) {
	blob := strings.Repeat("x", 256<<10) // each generation ≈ 256 KiB in memory
	cases := []struct {
		name     string
		maxGens  int
		maxBytes int64
		want     []int
	}{
		{"byte cap binds before generation cap", 8, 384 << 10, []int{2, 2, 1}},
		{"byte cap applies with generation cap disabled", 0, 384 << 10, []int{2, 2, 1}},
		{"generation cap binds before byte cap", 2, 16 << 20, []int{2, 2, 1}},
		{"zero byte cap keeps generation cap", 2, 0, []int{2, 2, 1}},
		{"zero caps merge everything", 0, 0, []int{5}},
		{"oversized generation merges whole and makes progress", 8, 1, []int{1, 1, 1, 1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := openTestDB(t, "file://"+t.TempDir(), "w1", func(o *Options) {
				o.MergeMaxGenerations, o.MergeMaxBytes = tc.maxGens, tc.maxBytes
			})
			s := createGeneric(t, db, "caps", false)
			for i := 0; i < 5; i++ {
				seal(t, s, Row{Key: fmt.Sprintf("k%d", i), Values: []any{fmt.Sprintf("k%d", i), int64(i), blob}})
			}
			var passes []int
			for pendingOf(t, s, db.Shard()) > 0 {
				before := pendingOf(t, s, db.Shard())
				res := call(s.MergeOnce(ctx, "")).must(t)
				passes = append(passes, res.Reclaimed)
				require.Equal(t, before-res.Reclaimed, pendingOf(t, s, db.Shard()))
				require.Len(t, allRows(t, s, SourceAll), 5, "nothing lost mid-way")
				require.Equal(t, listedGens(t, s, db.Shard()), genFilesOnDisk(t, s, db.Shard()))
			}
			require.Equal(t, tc.want, passes)
			page := call(s.List(ctx, ListOptions{Limit: 100})).must(t)
			require.Len(t, page.Rows, 5)
			for _, r := range page.Rows {
				require.Equal(t, blob, r["s"], "payload bytes survive the merge exactly")
			}
		})
	}
}

// Prepare runs while a reader holds the lock; commit waits for it.
func TestPrepareDoesNotBlockOnReadLockButCommitWaits(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "locks")
	sealGenerations(t, s, 3)
	s.mergeLock.RLock() // a long prepare elsewhere, or any shared holder
	p, err := s.Prepare(ctx, PrepareParams{})
	require.NoError(t, err, "prepare must not wait for a shared holder")
	require.NotNil(t, p)

	// Reads and appends go on while the lock is held.
	call(s.Get(ctx, "k1")).must(t)
	appendRows(t, s, row("k9", 9))

	done := make(chan RoundShardResult, 1)
	go func() {
		res, err := commitOne(ctx, s, p)
		assert.NoError(t, err)
		done <- res
	}()
	select {
	case <-done:
		t.Fatal("commit finished while a shared holder had the lock")
	case <-time.After(200 * time.Millisecond):
	}
	s.mergeLock.RUnlock()
	select {
	case res := <-done:
		require.Equal(t, 3, res.Reclaimed)
	case <-time.After(10 * time.Second):
		t.Fatal("commit did not finish after the lock was released")
	}
}

// Duplicate keys dedupe to the newest write, before and after merge, and across shards; a
// peer shard's merge never hides a row.
func TestNewestWriteWinsAcrossShardsAndMerges(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a := openTestDB(t, url, "wa")
			b := openTestDB(t, url, "wb")
			sa := createGeneric(t, a, "dups", false)
			sb := openGeneric(t, b, "dups")

			appendRows(t, sa, row("x", 1), row("x", 2)) // later in one batch = newer
			flush(t, sa)
			seal(t, sb, row("x", 3), row("y", 10))
			seal(t, sa, row("z", 5))
			want := map[string]int64{"x": 3, "y": 10, "z": 5}
			require.Equal(t, want, allRows(t, sa, SourceAll))

			// Merge only shard b (the newer x): the base has x=3; shard a's older x=1/2
			// stays pending and must lose.
			call(sb.MergeOnce(ctx, b.Shard())).must(t)
			require.Equal(t, want, allRows(t, sa, SourceAll))
			// Now merge shard a: its older x must not win over the base's x=3.
			call(sa.MergeAll(ctx)).must(t)
			require.Equal(t, want, allRows(t, sb, SourceAll))
			require.Equal(t, want, allRows(t, sb, SourceBase))
			require.EqualValues(t, 3, toInt64(call(sb.Get(ctx, "x")).must(t)["n"]))
		})
	}
}

// Two prepares of the same generations commit once; the loser's files are removed.
func TestTwoPreparesOfOneShardCommitOnce(t *testing.T) {
	ctx := context.Background()
	db, s, p1, p2 := twoPrepares(t, "twice")
	require.NotEqual(t, p1.Staged[0].Path, p2.Staged[0].Path)

	r1 := call(commitOne(ctx, s, p1)).must(t)
	require.Equal(t, RoundCommitted, r1.Outcome)
	r2 := call(commitOne(ctx, s, p2)).must(t)
	require.Equal(t, RoundAlreadyCommitted, r2.Outcome)
	require.Equal(t, r1.BaseVersion, r2.BaseVersion, "the second commit published nothing")

	require.False(t, onStorage(t, db.bucket, p2.Staged[0].Path), "the losing attempt's staged file is removed")
	// Re-committing the winner is idempotent too.
	require.Equal(t, RoundAlreadyCommitted, call(commitOne(ctx, s, p1)).must(t).Outcome)
	require.Len(t, allRows(t, s, SourceBase), 4)
	require.Len(t, call(s.loadBase(ctx)).must(t).Runs, 1)
}

// Two runs racing on one pass both reported its generations as reclaimed, so WalReclaimed
// counted them twice: the commit that finds the range merged by the other attempt's run,
// whether it found it before claiming or lost the publish to it, now reports none, and the
// winner's retry (its first reply lost) still reports them.
func TestFindingTwoRunsRacingOnOnePassReportItsReclaimOnce(t *testing.T) {
	for _, race := range []string{"after", "lost publish"} {
		t.Run(race, func(t *testing.T) {
			ctx := context.Background()
			db, s, p1, p2 := twoPrepares(t, "reclaimonce")

			var r1 RoundShardResult
			var armed atomic.Bool
			if race == "after" {
				r1 = call(commitOne(ctx, s, p1)).must(t)
			} else {
				// p2 has claimed and drafted the version p1 publishes first.
				armed.Store(true)
				db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
					if op == objstore.OpPutIfAbsent && strings.HasPrefix(key, versionsPrefix(s.target)) && armed.CompareAndSwap(true, false) {
						r1 = call(commitOne(ctx, s, p1)).must(t)
					}
					return nil
				}})
			}
			r2 := call(commitOne(ctx, s, p2)).must(t)
			require.False(t, armed.Load(), "p1 published while p2 committed")
			require.Equal(t, RoundCommitted, r1.Outcome)
			require.Equal(t, 4, r1.Reclaimed)
			require.Equal(t, RoundAlreadyCommitted, r2.Outcome)
			require.Zero(t, r2.Reclaimed, "the other attempt's run holds the pass: its reclaim is the winner's to report")

			again := call(commitOne(ctx, s, p1)).must(t)
			require.Equal(t, RoundAlreadyCommitted, again.Outcome)
			require.Equal(t, 4, again.Reclaimed, "the winner's retry reports what its lost reply did")
			again = call(commitOne(ctx, s, p2)).must(t)
			require.Zero(t, again.Reclaimed)
		})
	}
}

// Racing committers from many shards all land: 8 writers (shards) each prepare a merge, then
// all commit at the same moment to one base table. The losers of each put-if-absent round
// reload and rebase, so the base ends at version 8 with 8 runs, every watermark set, and every
// row readable from a fresh process.
func TestRacingCommittersFromManyShardsAllLand(t *testing.T) {
	urls := backends(t)
	urls["s3"] = s3URL(t)
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const shards = 8
			stores := shardStores(t, url, "race", shards)
			want := map[string]int64{}
			prepared := make([]*PreparedMerge, shards)
			for i, s := range stores {
				for g := 0; g < 3; g++ {
					k := fmt.Sprintf("s%d-g%d", i, g)
					want[k] = int64(i*10 + g)
					seal(t, s, row(k, want[k]))
				}
				prepared[i] = call(s.Prepare(ctx, PrepareParams{AttemptKey: fmt.Sprintf("race-%d", i)})).must(t)
			}
			start := make(chan struct{})
			errs := make([]error, shards)
			results := make([]RoundShardResult, shards)
			var wg sync.WaitGroup
			for i, s := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i], errs[i] = commitOne(ctx, s, prepared[i])
				}()
			}
			close(start)
			wg.Wait()
			versions := map[uint64]bool{}
			for i, err := range errs {
				require.NoError(t, err, "shard %d", i)
				require.Equal(t, RoundCommitted, results[i].Outcome)
				require.False(t, versions[results[i].BaseVersion], "two commits published version %d", results[i].BaseVersion)
				versions[results[i].BaseVersion] = true
			}
			base := call(stores[0].loadBase(ctx)).must(t)
			require.EqualValues(t, shards, base.Version, "one base version per merge, none lost")
			require.Len(t, base.Runs, shards)
			reader := openGeneric(t, openTestDB(t, url, "reader"), "race")
			for i, s := range stores {
				require.EqualValues(t, 3, base.Watermarks[s.db.Shard()], "shard %d", i)
				require.Equal(t, 0, pendingOf(t, reader, s.db.Shard()))
			}
			require.Equal(t, want, allRows(t, reader, SourceBase))
			require.Equal(t, want, allRows(t, reader, SourceAll))
			require.Empty(t, allRows(t, reader, SourceWAL))
		})
	}
}

// Crash between any two steps of the merge loses nothing and doubles nothing.
func TestCrashBetweenMergeStepsLosesNothing(t *testing.T) {
	steps := []string{"after-prepare", "after-claim", "after-base-commit", "after-drain"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			url := fmt.Sprintf("mem://crash-%s-%d", step, testURLSeq.Add(1))
			_, s := newGenericStore(t, url, "crash")
			for i := 0; i < 5; i++ {
				seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)), row("shared", int64(100+i)))
			}
			want := allRows(t, s, SourceAll)
			p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/1"})).must(t)
			switch step {
			case "after-prepare":
			case "after-claim":
				require.NoError(t, errOf(s.claim(ctx, p, "commit")))
			case "after-base-commit":
				publishOnly(t, s, p)
			case "after-drain":
				publishOnly(t, s, p)
				require.NoError(t, errOf(s.drain(ctx, p.Shard, p.Generations)))
			}
			// "Crash": drop the process without closing, open a new one with the same id.
			db2 := openTestDB(t, url, "w1")
			s2 := openGeneric(t, db2, "crash")
			require.Equal(t, want, allRows(t, s2, SourceAll), "reads right after the crash")

			// The retried activity (same attempt key) or a fresh merge both converge.
			if step != "after-prepare" {
				_ = call(commitOne(ctx, s2, p)).must(t)
			}
			call(s2.MergeAll(ctx)).must(t)
			require.Equal(t, want, allRows(t, s2, SourceAll))
			require.Equal(t, want, allRows(t, s2, SourceBase))
			require.Equal(t, 0, pendingOf(t, s2, db2.Shard()))
			require.Empty(t, genFilesOnDisk(t, s2, db2.Shard()))
			base := call(s2.loadBase(ctx)).must(t)
			var rows int64
			for _, r := range base.Runs {
				rows += r.Rows
			}
			if step == "after-prepare" {
				// The prepared attempt never committed; abort removes exactly its file.
				require.Equal(t, 1, call(s2.Abort(ctx, p)).must(t).Deleted)
			}
			require.EqualValues(t, len(want), rows, "no row stored twice in the base")
			require.Len(t, listKeys(t, db2.bucket, dataPrefix(s2.target)), len(base.Runs), "no staged file left behind")
		})
	}
}

// A crash after the WAL write and before a seal: the restarted writer replays the WAL.
func TestRestartedWriterReplaysWAL(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	_, s := newGenericStore(t, url, "replay")
	seal(t, s, row("a", 1))
	appendRows(t, s, row("b", 2), row("a", 3))
	epoch := func() uint64 {
		st := call(s.Stats(ctx)).must(t)
		require.Len(t, st.Shards, 1)
		return st.Shards[0].WriterEpoch
	}
	killed := epoch()
	require.NotZero(t, killed, "stats report the shard's writer epoch")
	// No Close: simulate a kill. A new process with the same instance id recovers.
	db2 := openTestDB(t, url, "w1")
	n, err := db2.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, killed+1, epoch(), "the restarted process claimed the shard with the next epoch")
	reader := openTestDB(t, url, "r")
	require.Equal(t, map[string]int64{"a": 3, "b": 2}, allRows(t, openGeneric(t, reader, "replay"), SourceAll))

	// The old process is fenced: its next append fails instead of acknowledging rows
	// that nobody would replay... and its one retry reclaims the shard, fencing db2.
	appendRows(t, s, row("c", 4))
	s2 := openGeneric(t, db2, "replay")
	require.NoError(t, errOf(s2.Append(ctx, []Row{row("d", 5)})), "db2 reclaims on its one retry")
	flush(t, s2)
	_, err = s.Flush(ctx)
	if err != nil {
		require.ErrorIs(t, err, ErrFenced)
	}
	db3 := openTestDB(t, url, "w1")
	require.NoError(t, errOf(db3.Recover(ctx)))
	got := allRows(t, openGeneric(t, openTestDB(t, url, "r2"), "replay"), SourceAll)
	require.Equal(t, map[string]int64{"a": 3, "b": 2, "c": 4, "d": 5}, got, "every acknowledged append survives the fencing dance")
}

// Recover replays every store that a killed process left rows in, however many it lists
// at once, and leaves the others alone.
func TestRecoverReplaysEveryKilledStore(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://recover-%d", testURLSeq.Add(1))
	db := openTestDB(t, url, "w1")
	const stores = 3*recoverParallel + 1
	for i := range stores {
		s := createGeneric(t, db, fmt.Sprintf("s%03d", i), false)
		if i%3 != 0 {
			appendRows(t, s, row("k", int64(i))) // no Close: the process is killed
		}
	}
	db2 := openTestDB(t, url, "w1")
	n, err := db2.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, stores-(stores+2)/3, n, "the stores with unsealed rows, and only those")
	reader := openTestDB(t, url, "r")
	for i := range stores {
		want := map[string]int64{}
		if i%3 != 0 {
			want["k"] = int64(i)
		}
		require.Equal(t, want, allRows(t, openGeneric(t, reader, fmt.Sprintf("s%03d", i)), SourceAll), "store %d", i)
	}
}

func TestGroupCommitSharesWALObjects(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "group")
	const writers, per = 32, 20
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				assert.NoError(t, errOf(s.Append(ctx, []Row{row(fmt.Sprintf("w%d-%d", w, i), int64(i))})))
			}
		}()
	}
	wg.Wait()
	w := s.residentWriter()
	require.NotNil(t, w)
	walObjects := int(w.nextPos) - 2 // minus the fence marker and the 1-based start
	require.Less(t, walObjects, writers*per, "concurrent appends must share WAL objects")
	require.Len(t, allRows(t, s, SourceAll), writers*per)
	t.Logf("%d appends in %d WAL objects", writers*per, walObjects)
}

func TestSealOnAppendIsVisibleEverywhereAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	db := openTestDB(t, url, "w1")
	createGeneric(t, db, "sealed", true)
	require.NoError(t, db.Close(ctx))

	db2 := openTestDB(t, url, "w1")
	s := openGeneric(t, db2, "sealed")
	require.True(t, s.meta.SealOnAppend, "seal mode is persisted")
	appendRows(t, s, row("a", 1))
	other := openGeneric(t, openTestDB(t, url, "reader"), "sealed")
	requireGetN(t, other, "a", 1, "seal-on-append rows are visible to every reader on return")

	// Datagen always seals on append.
	dg, err := db2.Create(ctx, Target{Kind: KindDatagen, Name: "dg"}, CreateOptions{})
	require.NoError(t, err)
	require.True(t, dg.meta.SealOnAppend)
	f := false
	require.ErrorIs(t, errOf(db2.Create(ctx, Target{Kind: KindDatagen, Name: "dg2"}, CreateOptions{SealOnAppend: &f})), ErrInvalidInput)
}

func TestReadCapsWarnAndRefuse(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://caps-%d", testURLSeq.Add(1))
	// A writer stops at its own limit (TestPendingMaxBoundsEveryWrite), so one without a
	// limit leaves 4 pending generations for the reader.
	_, w := newGenericStore(t, url, "caps", func(o *Options) { o.PendingMax = 0 })
	sealGenerations(t, w, 4)
	s := openGeneric(t, openTestDB(t, url, "r", func(o *Options) { o.PendingMax = 3; o.PendingWarn = 2 }), "caps")
	require.ErrorIs(t, errOf(s.Get(ctx, "k1")), ErrTooManyPending)
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{})), ErrTooManyPending)
	st, err := s.Stats(ctx)
	require.NoError(t, err, "stats never refuse: schedulers must see the debt")
	require.Equal(t, 4, st.TotalPending())

	// The total across shards is capped too: 2 shards × 2 pass the per-shard check.
	url2 := fmt.Sprintf("mem://caps-total-%d", testURLSeq.Add(1))
	a := openTestDB(t, url2, "a", func(o *Options) { o.PendingMax = 3 })
	b := openTestDB(t, url2, "b", func(o *Options) { o.PendingMax = 3 })
	sa := createGeneric(t, a, "caps", false)
	sb := openGeneric(t, b, "caps")
	for i := 0; i < 2; i++ {
		seal(t, sa, row(fmt.Sprintf("a%d", i), 1))
		seal(t, sb, row(fmt.Sprintf("b%d", i), 1))
	}
	require.ErrorIs(t, errOf(sa.List(ctx, ListOptions{})), ErrTooManyPending)

	// 0 = off.
	off := openGeneric(t, openTestDB(t, url2, "c", func(o *Options) { o.PendingMax = 0 }), "caps")
	call(off.List(ctx, ListOptions{})).must(t)
}

func TestCorruptGenerationBlocksOnlyItsShard(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://corrupt-%d", testURLSeq.Add(1))
	a := openTestDB(t, url, "a")
	b := openTestDB(t, url, "b")
	sa := createGeneric(t, a, "c", false)
	sb := openGeneric(t, b, "c")
	seal(t, sa, row("a1", 1))
	seal(t, sb, row("b1", 1))
	gens := listedGens(t, sa, a.Shard())
	require.Len(t, gens, 1)
	require.NoError(t, a.bucket.Put(ctx, gens[0], []byte("ARROW1 garbage, truncated")))

	require.ErrorIs(t, errOf(sa.Prepare(ctx, PrepareParams{Shard: a.Shard()})), ErrCorrupt)
	res, err := sb.MergeOnce(ctx, b.Shard())
	require.NoError(t, err, "the healthy shard still merges")
	require.Equal(t, 1, res.Reclaimed)
}

func TestConcurrentPreparesQueueOnOneBudget(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(1 << 20)
	url := fmt.Sprintf("mem://budget-%d", testURLSeq.Add(1))
	stores := shardStores(t, url, "b", 4, func(o *Options) { o.Budget = budget; o.MergeMaxBytes = 1 << 20 })
	for i, s := range stores {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
	var maxSeen atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				if r := budget.Reserved(); r > maxSeen.Load() {
					maxSeen.Store(r)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, errOf(s.MergeOnce(ctx, "")))
		}()
	}
	wg.Wait()
	close(stop)
	require.LessOrEqual(t, maxSeen.Load(), int64(1<<20))
	require.EqualValues(t, 0, budget.Reserved(), "every reservation returned")
	require.Len(t, allRows(t, stores[0], SourceBase), 4)
}

func TestAbortDeletesOnlyWhenCommitIsProvenAbsent(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "abort")
	seal(t, s, row("a", 1))
	p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/a"})).must(t)
	require.Equal(t, 1, call(commitOne(ctx, s, p)).must(t).Reclaimed)
	ar := call(s.Abort(ctx, p)).must(t)
	require.True(t, ar.CommitPresent)
	require.Equal(t, 0, ar.Deleted)
	require.Equal(t, map[string]int64{"a": 1}, allRows(t, s, SourceBase))

	seal(t, s, row("b", 2))
	p2 := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/b"})).must(t)
	ar = call(s.Abort(ctx, p2)).must(t)
	require.Equal(t, 1, ar.Deleted)
	require.ErrorIs(t, errOf(commitOne(ctx, s, p2)), ErrStalePreparation, "an aborted attempt can never commit")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceAll))
}

func TestStalePreparation(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "stale", func(o *Options) { o.MergeMaxGenerations = 2 })
	sealGenerations(t, s, 3)
	three := 3
	wide := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wide", MaxGenerations: &three})).must(t)
	require.Len(t, wide.Generations, 3)
	require.NoError(t, errOf(s.MergeOnce(ctx, ""))) // commits generations 1-2
	require.ErrorIs(t, errOf(commitOne(ctx, s, wide)), ErrStalePreparation)
	require.Equal(t, 1, call(s.Abort(ctx, wide)).must(t).Deleted)
	call(s.MergeAll(ctx)).must(t)
	require.Len(t, allRows(t, s, SourceBase), 3)
}

func TestCompactBase(t *testing.T) {
	ctx := context.Background()
	var ahead atomic.Int64
	db, s := newGenericStore(t, "file://"+t.TempDir(), "compact", func(o *Options) { o.MergeMaxGenerations = 1 }, aheadClock(&ahead))
	for i := 0; i < 6; i++ {
		seal(t, s, row("same", int64(i)), row(fmt.Sprintf("k%d", i), int64(i)))
	}
	require.NoError(t, s.Delete(ctx, "k0"))
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 7)
	var deletes int64
	for _, r := range base.Runs {
		deletes += r.Deletes
	}
	require.EqualValues(t, 1, deletes, "the merged runs count the tombstone of k0")
	want := allRows(t, s, SourceAll)

	// Bounded pass: 3 runs, not all → tombstone kept.
	res := call(s.CompactBase(ctx, CompactParams{MaxRuns: 3})).must(t)
	require.True(t, res.Committed)
	require.Equal(t, 3, res.InputRuns)
	require.Equal(t, 5, res.RunsLeft)
	require.Zero(t, res.DroppedDeletes)
	require.Equal(t, want, allRows(t, s, SourceAll))

	// A merge lands between passes; compaction keeps its run.
	seal(t, s, row("late", 42))
	call(s.MergeAll(ctx)).must(t)
	want["late"] = 42
	// A pass drops only a tombstone older than any write still in flight may be.
	ahead.Store(int64(tombstonesSettle))
	res = call(s.CompactBase(ctx, CompactParams{MaxRuns: -1})).must(t)
	require.True(t, res.Committed)
	require.Equal(t, 1, res.RunsLeft)
	require.EqualValues(t, 1, res.DroppedDeletes, "all runs rewritten: the tombstone goes")
	require.Equal(t, want, allRows(t, s, SourceAll))
	base = call(s.loadBase(ctx)).must(t)
	require.EqualValues(t, len(want), base.Runs[0].Rows, "shadowed rows dropped")
	require.Len(t, listKeys(t, db.bucket, dataPrefix(s.target)), 1, "compacted inputs deleted")
}

func TestCompactionCommitsOnlyIfInputsAreCurrent(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "cc", func(o *Options) { o.MergeMaxGenerations = 1 })
	sealGenerations(t, s, 3)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	// Another compactor removes one input first.
	ok, _, err := s.publishCompaction(ctx, base.Runs[:1], nil, time.Time{})
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = s.publishCompaction(ctx, base.Runs[:2], nil, time.Time{})
	require.NoError(t, err)
	require.False(t, ok, "inputs changed: no commit")
}

func TestCreateAndOpenErrors(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "file://"+t.TempDir(), "w1")
	createGeneric(t, db, "g", false)
	_, err := db.Create(ctx, Target{Kind: KindGeneric, Name: "g"}, CreateOptions{Schema: &testSchema})
	require.ErrorIs(t, err, ErrAlreadyExists)
	require.ErrorIs(t, errOf(db.Open(ctx, Target{Kind: KindGeneric, Name: "nope"})), ErrNotFound)
	for _, bad := range []string{"", "..", "a/b", "a:b", "_registry", ".hidden", strings.Repeat("x", 200)} {
		require.ErrorIs(t, errOf(db.Create(ctx, Target{Kind: KindGeneric, Name: bad}, CreateOptions{Schema: &testSchema})), ErrInvalidInput, bad)
	}
	require.ErrorIs(t, errOf(db.Create(ctx, Target{Kind: KindGeneric, Name: "noschema"}, CreateOptions{})), ErrInvalidInput)
	s := openGeneric(t, db, "g")
	require.ErrorIs(t, errOf(s.Append(ctx, []Row{{Key: "a", Values: []any{"a"}}})), ErrInvalidInput)
	require.ErrorIs(t, errOf(s.Append(ctx, []Row{{Key: "", Values: []any{"", nil, nil}}})), ErrInvalidInput)
	infos := call(db.ListStores(ctx, KindGeneric, "", 10)).must(t)
	require.Len(t, infos.Stores, 1)
	require.ErrorIs(t, errOf(db.ListStores(ctx, "bogus", "", 10)), ErrInvalidInput)
	require.True(t, errors.Is(fmt.Errorf("wrapped: %w", ErrCorrupt), ErrCorrupt))
}

// Every read (List and Get alike, not Stats) samples the pending generations of each shard,
// and how many shards the store has: each costs the read a manifest load, and a shard comes
// from every writer instance id that ever wrote to the store.
func TestReadsSamplePendingGenerationsAndShards(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://hist-%d", testURLSeq.Add(1))
	metrics := NewMetrics(prometheus.NewRegistry(), nil)
	_, s := newGenericStore(t, url, "h", func(o *Options) { o.Metrics = metrics })
	sealGenerations(t, s, 3)
	for _, id := range []string{"w2", "w3"} {
		seal(t, openGeneric(t, openTestDB(t, url, id), "h"), row(id, 1))
	}
	call(s.List(ctx, ListOptions{})).must(t)
	call(s.Get(ctx, "k1")).must(t)
	require.NoError(t, errOf(s.Stats(ctx)), "stats are not a read: they are not sampled")
	for _, h := range []struct {
		hist       prometheus.Histogram
		count, sum int
	}{{metrics.ReadPendingGenerations, 2 * 3, 2 * (3 + 1 + 1)}, {metrics.ReadShards, 2, 2 * 3}} {
		var m dto.Metric
		require.NoError(t, h.hist.Write(&m))
		require.EqualValues(t, h.count, m.GetHistogram().GetSampleCount())
		require.EqualValues(t, h.sum, m.GetHistogram().GetSampleSum())
	}
}

// Truncated or garbled Parquet runs are typed corrupt-data errors, never panics.
func TestGarbledRunIsCorrupt(t *testing.T) {
	for _, damage := range []string{"truncated", "garbled"} {
		t.Run(damage, func(t *testing.T) {
			ctx := context.Background()
			db, s := newGenericStore(t, fmt.Sprintf("mem://garble-%d", testURLSeq.Add(1)), "g")
			seal(t, s, row("a", 1), row("b", 2))
			call(s.MergeAll(ctx)).must(t)
			base := call(s.loadBase(ctx)).must(t)
			data := getObject(t, db.bucket, base.Runs[0].Path)
			if damage == "truncated" {
				data = data[:len(data)/2]
			} else {
				for i := 8; i < len(data)-8; i += 7 {
					data[i] ^= 0x5a
				}
			}
			require.NoError(t, db.bucket.Put(ctx, base.Runs[0].Path, data))
			reader := openGeneric(t, openTestDB(t, db.bucket.URL(), "r"), "g")
			require.ErrorIs(t, errOf(reader.Get(ctx, "a")), ErrCorrupt)
			require.ErrorIs(t, errOf(reader.List(ctx, ListOptions{})), ErrCorrupt)
		})
	}
}

// called is a call's value and error, for a test to check: call(s.Stats(ctx)).must(t).
type called[T any] struct {
	v   T
	err error
}

func call[T any](v T, err error) called[T] { return called[T]{v, err} }

// must is the call's value; t fails where the call was made if the call failed.
func (c called[T]) must(t testing.TB) T {
	t.Helper()
	require.NoError(t, c.err)
	return c.v
}

// requireGetN requires that s reads key, with n = want.
func requireGetN(t *testing.T, s *Store, key string, want int64, msgAndArgs ...any) {
	t.Helper()
	got, err := s.Get(context.Background(), key)
	require.NoError(t, err, msgAndArgs...)
	require.EqualValues(t, want, toInt64(got["n"]), msgAndArgs...)
}

// errOf is the error of a call whose other result the test does not look at.
func errOf[T any](_ T, err error) error { return err }
