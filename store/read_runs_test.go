package store

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A Get over base runs that the cache does not keep decodes only the row groups that may hold
// its key, a batch at a time, into the read budget's buffers: every key reads back as List
// (whole runs) shows it, tombstones and shadowed versions included, within the read budget,
// and every byte goes back to it.
func TestGetFromRunsPagedByRowGroups(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(32 << 20)
	db := openTestDB(t, "file://"+t.TempDir(), "w1", func(o *Options) {
		o.MergeMaxGenerations = 1
		o.ReadBudget = rb
		o.CacheBytes = 1 // keeps nothing: every run is read privately
	})
	s := createGeneric(t, db, "getruns", false)
	pad := strings.Repeat("v", 1000) // 9 MB runs: two row groups of a merge's 8 MiB chunks
	const rows = 9000
	for g := 0; g < 2; g++ {
		var rs []Row
		for i := 0; i < rows; i++ {
			k := fmt.Sprintf("k%06d", i*2+g) // interleaved
			if g == 1 && i%3 == 0 {
				k = fmt.Sprintf("k%06d", i*2) // shadows a run-0 version
			}
			rs = append(rs, keyRow(k, int64(g*rows+i), pad))
		}
		seal(t, s, rs...)
		call(s.MergeAll(ctx)).must(t)
	}
	// One WAL write of the tombstones, where a Delete each made 1,286 of them.
	var dead []string
	for i := 0; i < rows; i += 7 {
		dead = append(dead, fmt.Sprintf("k%06d", i*2+1))
	}
	deleteKeys(t, s, dead...)
	flush(t, s)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.GreaterOrEqual(t, len(base.Runs), 2)
	r := call(openRunBatches(ctx, nil, getObject(t, db.bucket, base.Runs[0].Path), s.codec, "run")).must(t)
	require.Greater(t, r.pf.NumRowGroups(), 1, "the run must have several row groups to pick from")
	r.close()

	want := bigList(t, s)
	for i := 0; i < 2*rows; i += 331 {
		k := fmt.Sprintf("k%06d", i)
		got, err := s.Get(ctx, k)
		if w, ok := want[k]; ok {
			require.NoError(t, err, k)
			require.Equal(t, w, fmt.Sprint(got["n"], "/", got["s"]), k)
		} else {
			require.ErrorIs(t, err, ErrNotFound, k)
		}
	}
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated(), "every buffer of the reads went back")
	require.LessOrEqual(t, rb.Pooled(), rb.Limit())
}

// Concurrent Gets over a streamed run share the read budget: a Get whose footer asks for more
// than its admission guessed, while other reads are queued, is admitted again holding nothing
// instead of failing with ErrBudgetBusy; every Get returns what the whole decode returns, its
// allocations stay within its reservation (checked by the allocator under -race), and every
// byte goes back.
func TestConcurrentGetsFromRunsShareTheReadBudget(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(24 << 20)
	s, ref, _ := streamedRunStore(t, 20000, 100, 300, 4, rb)
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%06d", i*1250+i%2) // base keys and keys between them
	}
	type result struct {
		row map[string]any
		err error
	}
	want := make([]result, len(keys))
	for i, k := range keys {
		want[i].row, want[i].err = ref.Get(ctx, k)
	}
	got := make([]result, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { got[i].row, got[i].err = s.Get(ctx, k) })
	}
	wg.Wait()
	for i := range keys {
		if want[i].err != nil {
			require.ErrorIs(t, got[i].err, ErrNotFound, keys[i])
			continue
		}
		require.NoError(t, got[i].err, keys[i])
		require.Equal(t, want[i].row, got[i].row, keys[i])
	}
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
	require.LessOrEqual(t, rb.Pooled(), rb.Limit())
}

// A base run whose object is small enough for the cache but whose values compress well decodes
// to more than the cache keeps: reads stream it like a run the cache would not keep, instead of
// decoding it whole on the Go heap on every read (the cache refused the decoded run each time)
// while the read budget was charged for its object, a twentieth of what the decode held.
func TestFindingCompressibleRunIsStreamedNotDecodedWholeOnEveryRead(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(32 << 20)
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 8 << 20 // keeps files up to 2 MiB
	})
	s, run := compressibleRun(t, db, "compressible")
	require.True(t, db.cache.keeps(run.Bytes), "the object alone is one the cache keeps")
	whole := call(decodeParquet(ctx, getObject(t, db.bucket, run.Path), s.codec, "run")).must(t)
	require.False(t, db.cache.keeps(whole.bytes), "decoded, the run is one the cache does not keep")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%06d", i*2000+7)
		got := call(s.Get(ctx, k)).must(t)
		require.Equal(t, k, got["id"])
		require.Equal(t, compressiblePad, got["s"])
	}
	runtime.ReadMemStats(&after)
	t.Logf("run of %d bytes, %d decoded; four Gets allocated %d bytes", run.Bytes, whole.bytes, after.TotalAlloc-before.TotalAlloc)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(whole.bytes),
		"four Gets allocated more on the Go heap than one whole decode of the run holds")
	page := call(s.List(ctx, ListOptions{Limit: 3, After: "k004000"})).must(t)
	require.Len(t, page.Rows, 3)
	require.Equal(t, "k004001", page.Rows[0]["id"])
	require.Equal(t, "k004003", page.Next)
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated(), "every buffer of the reads went back")
}

// A base run the cache keeps is decoded whole once, and that decode holds about twice the run's
// rows, which for values that compress is many times its object: the read takes those bytes
// from the read budget, as its footer gives them, before it decodes. It was charged twice its
// object, so a read decoded 10 MB of rows (38 MB allocated) with 4 MiB of the budget free.
func TestFindingRunDecodedThroughTheCacheIsChargedItsRows(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(16 << 20)
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 64 << 20 // keeps files up to 16 MiB, decoded
	})
	s, run := compressibleRun(t, db, "chargedrows")
	require.Less(t, 2*run.Bytes, int64(4<<20), "the run's object alone fits in what the budget has free")

	held, _, err := rb.Reserve(ctx, 12<<20) // another read's
	require.NoError(t, err)
	require.ErrorIs(t, errOf(s.Get(ctx, "k000100")), ErrBudgetBusy, "a decode of 10 MB of rows went ahead with 4 MiB of the read budget free")
	require.Nil(t, db.cache.peek(run.Path))
	held.Release()

	require.Equal(t, "k000100", call(s.Get(ctx, "k000100")).must(t)["id"])
	require.NotNil(t, db.cache.peek(run.Path), "decoded once, the run is the cache's")
	page := call(s.List(ctx, ListOptions{Limit: 2, After: "k008997"})).must(t)
	require.Len(t, page.Rows, 2)
	require.Equal(t, "k008999", page.Rows[1]["id"])
	require.Zero(t, rb.Reserved())
}

// A read over several compressible runs seen for the first time succeeds: a run its footer
// refuses does not cancel the others' loads, even slow ones, so one try finds every run larger
// than the cache keeps and the second streams them all.
func TestCompressibleRunsFoundOneATimeStillRead(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir() + "?nosync=1"
	_, s := newGenericStore(t, url, "compressibles", func(o *Options) { o.CacheBytes = 8 << 20 })
	const runs = 5
	for r := 0; r < runs; r++ {
		var rs []Row
		for i := 0; i < 9000; i++ {
			k := fmt.Sprintf("k%06d-%d", i, r) // every run spans the whole key range
			rs = append(rs, keyRow(k, int64(i), compressiblePad))
		}
		seal(t, s, rs...)
		call(s.MergeAll(ctx)).must(t)
	}
	// A run read while another is in flight is slow, so the first footer that refuses its run
	// arrives while the others are still being read.
	var inflight atomic.Int64
	slow := objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			if op == objstore.OpGet && strings.Contains(key, "/data/") && inflight.Add(1) > 1 {
				time.Sleep(300 * time.Millisecond)
			}
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if op == objstore.OpGet && strings.Contains(key, "/data/") {
				inflight.Add(-1)
			}
			return err
		},
	}
	b := call(objstore.OpenBucket(ctx, url)).must(t)
	ro := DefaultOptions()
	ro.InstanceID, ro.CacheBytes, ro.ReadBudget = "reader", 8<<20, NewBudget(64<<20)
	rdb := OpenDBOnBucket(b.WithFaults(slow), ro)
	t.Cleanup(func() { _ = rdb.Close(ctx) })
	r := openGeneric(t, rdb, "compressibles")
	page := call(r.List(ctx, ListOptions{Limit: 2, After: "k008998-4"})).must(t)
	require.Len(t, page.Rows, 2)
	require.Equal(t, "k008999-1", page.Rows[1]["id"])
}

// compressiblePad is the value of every row of compressibleRun.
var compressiblePad = strings.Repeat("v", 1000)

// compressibleRun creates store name on db and merges 9,000 rows of 1 KB values that Snappy
// shrinks about 14 times into its one base run, which it returns.
func compressibleRun(t *testing.T, db *DB, name string) (*Store, manifest.Run) {
	t.Helper()
	ctx := context.Background()
	s := createGeneric(t, db, name, false)
	var rs []Row
	for i := 0; i < 9000; i++ {
		rs = append(rs, keyRow(fmt.Sprintf("k%06d", i), int64(i), compressiblePad))
	}
	seal(t, s, rs...)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 1)
	return s, base.Runs[0]
}
