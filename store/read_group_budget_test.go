package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A read group that streams a base run privately and decodes generations through the cache
// holds one reservation for both: the run's arena and batches must fit beside the bytes the
// generations were charged. The run's footer window was compared against the whole
// reservation, generations' share included, so the group held the run's batches in bytes
// already counted for the generations and never grew.
func TestFindingMixedReadGroupKeepsTheCachedSourcesShare(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(64 << 20)
	db := openTestDB(t, fmt.Sprintf("mem://mixedgroup-%d", testURLSeq.Add(1)), "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 16 << 20 // keeps files up to 4 MiB: the generations, not the decoded run
	})
	s, run := compressibleRun(t, db, "mixedgroup")
	db.cache.large.add(run.Path) // as a first read would find from its footer, so one try streams it
	pad := strings.Repeat("g", 1000)
	for g := 0; g < 48; g++ {
		var rs []Row
		for i := 0; i < 100; i++ {
			rs = append(rs, keyRow(fmt.Sprintf("k%06d", g*150+i), int64(g), pad))
		}
		seal(t, s, rs...)
	}
	snap := call(s.snapshot(ctx, true)).must(t)
	srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
	require.LessOrEqual(t, len(srcs), readFanIn, "one group")

	var charged, window int64
	for _, src := range srcs {
		if !s.private(src) {
			charged += readCost(src)
		}
	}
	g := call(s.openGroup(ctx, srcs, "")).must(t)
	for _, r := range g.runs {
		if r != nil {
			window += r.rb.window
		}
	}
	require.Positive(t, window, "the run streams")
	held, private := rb.Reserved(), rb.Allocated()
	t.Logf("reserved %d: generations charged %d, private allocated %d, run window %d", held, charged, private, window)
	require.GreaterOrEqual(t, held, charged+private+window,
		"the group's reservation holds the generations' charge beside the run's arena and window")

	// Decoding every batch stays within it too.
	it := newMergeIter(g.cursors(""))
	var rows int
	for {
		if _, ok := it.next(); !ok {
			break
		}
		rows++
		require.LessOrEqual(t, rb.Allocated()+charged, rb.Reserved(), "row %d", rows)
	}
	require.NoError(t, g.err())
	g.release()
	require.Equal(t, 9000, rows)
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}

// A small generation decoded through the cache holds its Arrow metadata and IPC schema beside
// its rows, several times the object of a generation of a few rows: a read is charged that
// overhead per file, as the cache counts it (cachedFileOverhead), not the objects alone, which
// let a group of 64 generations of one row hold on the heap over ten times what it was charged.
func TestFindingSmallGenerationsAreChargedWhatTheyHoldDecoded(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(64 << 20)
	db := openTestDB(t, fmt.Sprintf("mem://smallgens-%d", testURLSeq.Add(1)), "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 64 << 20
	})
	s := createGeneric(t, db, "smallgens", false)
	for g := 0; g < readFanIn; g++ {
		seal(t, s, keyRow(fmt.Sprintf("k%03d", g), int64(g), "v"))
	}
	snap := call(s.snapshot(ctx, true)).must(t)
	srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
	require.Len(t, srcs, readFanIn)
	var objects int64
	for _, src := range srcs {
		require.False(t, s.private(src), "decoded through the cache")
		objects += src.bytes
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g := call(s.openGroup(ctx, srcs, "")).must(t)
	runtime.GC()
	runtime.ReadMemStats(&after)
	var held int64
	for _, f := range g.files {
		held += cachedBytes(f.bytes)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	charged := rb.Reserved()
	t.Logf("%d generations of %d bytes of objects: charged %d, the cache counts %d, live heap grew %d",
		len(srcs), objects, charged, held, heap)
	require.GreaterOrEqual(t, charged, held, "the read is charged what the cache counts for the files")
	require.GreaterOrEqual(t, charged, heap, "the read is charged what its decoded files hold on the heap")
	g.release()
	require.Zero(t, rb.Reserved())
}

// packedGenerationRows is how many rows of 1 KB values each generation of sealPackedGenerations
// holds: about 215 KB of record, so that four share an arena chunk and the fifth does not.
const packedGenerationRows = 210

// sealPackedGenerations seals n generations of s that its cache will not keep, each of about
// 215 KB, so that their read arena packs four into each 1 MiB chunk and leaves the rest of
// the chunk unused: nine take a third chunk.
func sealPackedGenerations(t *testing.T, s *Store, n int) {
	t.Helper()
	pad := strings.Repeat("p", 1000)
	for g := 0; g < n; g++ {
		var rs []Row
		for i := 0; i < packedGenerationRows; i++ {
			rs = append(rs, keyRow(fmt.Sprintf("p%02d-%04d", g, i), int64(i), pad))
		}
		seal(t, s, rs...)
	}
}

// privateEstimate is what a group of srcs is admitted with for the ones read privately: their
// arena's estimate and the decoded files' heap (tryOpenGroup, for generations alone).
func privateEstimate(s *Store, srcs []readSource) (want int64, private int) {
	var sizes []int64
	for _, src := range srcs {
		if s.private(src) {
			sizes = append(sizes, s.arenaRequest(src))
		}
	}
	return arenaEstimate(sizes) + int64(len(sizes))*decodedFileHeap, len(sizes)
}

// A read arena that needs a buffer beyond its reservation (one holding less than the arena's
// estimate) grows the reservation without waiting or refuses the buffer with ErrBudgetBusy,
// which fails the read: it used to take the buffer from the Go heap uncharged, so a read held
// more than the read budget bounds.
func TestFindingArenaBeyondItsEstimateIsChargedOrBusy(t *testing.T) {
	requests := []int64{200 << 10, 200 << 10, 200 << 10, 200 << 10, 200 << 10, 300 << 10}
	const admitted = 64 << 10 // the files' heap and no buffer
	rb := NewBudget(64 << 20)

	// With the budget free, the buffers past the reservation grow it.
	res := mustReserve(t, rb, admitted)
	a := newMemAccount(res, rb)
	r := newReadArena(a, requests)
	for _, n := range requests {
		buf, err := r.alloc(n)(int(n))
		require.NoError(t, err)
		require.Equal(t, int(n), cap(buf))
	}
	t.Logf("admitted %d, the arena took %d, reserved %d", admitted, a.Allocated(), res.Bytes())
	require.Greater(t, a.Allocated(), int64(admitted), "the arena went beyond its reservation")
	require.Equal(t, a.Allocated(), rb.Allocated(), "every buffer is charged to the budget")
	require.GreaterOrEqual(t, res.Bytes(), a.Allocated(), "and the reservation grew to hold it")
	r.free()
	res.Release()

	// With the rest of the budget held, it cannot grow: the buffer is refused, not uncharged.
	res = mustReserve(t, rb, admitted)
	blocker := mustReserve(t, rb, rb.Limit()-admitted)
	a = newMemAccount(res, rb)
	r = newReadArena(a, requests)
	heap := a.Allocated()
	for _, n := range []int64{requests[0], requests[5]} { // a chunk, a buffer of its own
		require.ErrorIs(t, errOf(r.alloc(n)(int(n))), ErrBudgetBusy)
	}
	require.Equal(t, heap, a.Allocated(), "no buffer was taken")
	require.Equal(t, heap, rb.Allocated())
	require.Equal(t, int64(admitted), res.Bytes())
	r.free()
	res.Release()
	blocker.Release()
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}

// A read group admitted again with the bytes a cached run's footer asked for (tryOpenGroup's
// extra) keeps them for that run: its private arena must not use them too. The arena took
// them first when it went beyond its estimate, then the run took them again, so the group
// held up to extra more than its reservation. Its estimate now covers its chunks' tails, so
// this checks the group's reservation holds its arena beside the run's decode.
func TestFindingRetrySlackIsKeptForTheCachedRun(t *testing.T) {
	checkRetrySlackIsKeptForTheCachedRun(t, "file://"+t.TempDir()+"?nosync=1")
}

// An arena still goes beyond its estimate when its objects are longer than their storage
// reports (an S3-compatible server that sends no Content-Length reports 0): its growth must
// come from the reservation, not from the extra the cached run takes.
func TestFindingRetrySlackIsKeptFromAnArenaPastItsEstimate(t *testing.T) {
	checkRetrySlackIsKeptForTheCachedRun(t, s3test.NoLengthBucketURL(t, "retryslack"))
}

// checkRetrySlackIsKeptForTheCachedRun opens a group of nine private generations and a base
// run decoded through the cache, stored at url, with the extra a retry gives the run, the run
// read once the generations are, and fails unless the reservation holds everything held.
func checkRetrySlackIsKeptForTheCachedRun(t *testing.T, url string) {
	ctx := context.Background()
	rb := NewBudget(64 << 20)
	db := openTestDB(t, url, "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 640 << 10 // keeps the small run decoded, not the 215 KB generations
	})
	s := createGeneric(t, db, "retryslack", false)
	var rs []Row
	for i := 0; i < 100; i++ {
		rs = append(rs, keyRow(fmt.Sprintf("r%04d", i), int64(i), compressiblePad))
	}
	seal(t, s, rs...)
	call(s.MergeAll(ctx)).must(t)
	sealPackedGenerations(t, s, 9)
	snap, err := s.snapshot(ctx, true)
	require.NoError(t, err)
	srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
	want, private := privateEstimate(s, srcs)
	require.Equal(t, 9, private)
	var run readSource
	var charged int64 // what the sources decoded through the cache were admitted with
	gens := map[string]bool{}
	for _, src := range srcs {
		if s.private(src) {
			gens[src.path] = true
		} else {
			require.True(t, src.run, "only the run is decoded through the cache")
			run, charged = src, charged+readCost(src)
		}
	}
	require.NotEmpty(t, run.path)
	db.cache.forget(run.path)

	// The extra a retry is given: what the run's footer says its decode holds beyond its charge.
	data := getObject(t, db.bucket, run.path)
	var decoded int64
	errFooter := errors.New("footer read")
	_, err = decodeParquetAdmitted(ctx, data, s.codec, "run", func(d int64) error { decoded = d; return errFooter })
	require.ErrorIs(t, err, errFooter)
	extra := 2*(decoded+decoded/8) - readCost(run)
	require.Positive(t, extra, "the run decodes to more than its charge")

	// The run's object is read once the generations are in the arena.
	gensRead := make(chan struct{})
	var reads atomic.Int64
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			if op == objstore.OpGet && key == run.path {
				<-gensRead
			}
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if op == objstore.OpGet && gens[key] && reads.Add(1) == int64(len(gens)) {
				close(gensRead)
			}
			return err
		},
	})
	g, short, err := s.tryOpenGroup(ctx, srcs, "", extra)
	require.NoError(t, err)
	require.Zero(t, short)
	held := rb.Allocated() + charged + extra
	t.Logf("admitted %d (extra %d), reserved %d; the arena took %d, the run %d", want+charged+extra, extra, rb.Reserved(), rb.Allocated(), charged+extra)
	require.GreaterOrEqual(t, rb.Reserved(), held, "the group holds its arena beside the run's decode")
	g.release()
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}

// The extra of a group admitted again for its streamed runs' window (growForRuns) is theirs
// once no cached run took it: a retry admitted with exactly the bytes the first try lacked
// opens, where the budget has nothing more to give.
func TestRetrySlackNoCachedRunTookIsLeftToTheStreamedRuns(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(64 << 20)
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 16 << 20
	})
	s, run := compressibleRun(t, db, "windowslack")
	db.cache.large.add(run.Path) // as a first read would find from its footer, so it streams
	snap := call(s.snapshot(ctx, true)).must(t)
	srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
	require.Len(t, srcs, 1)
	require.True(t, s.private(srcs[0]))
	want := compactRunGuess(manifest.Run{Bytes: run.Bytes}) + arenaEstimate([]int64{s.arenaRequest(srcs[0])}) + decodedFileHeap

	blocker := mustReserve(t, rb, rb.Limit()-want)
	_, short, err := s.tryOpenGroup(ctx, srcs, "", 0)
	require.ErrorIs(t, err, ErrBudgetBusy, "the run's window is more than its admission guessed")
	require.Positive(t, short)
	blocker.Release()

	blocker = mustReserve(t, rb, rb.Limit()-want-short)
	g, _, err := s.tryOpenGroup(ctx, srcs, "", short)
	require.NoError(t, err, "the retry's extra is the window's")
	require.Equal(t, rb.Limit(), rb.Reserved())
	g.release()
	blocker.Release()
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}
