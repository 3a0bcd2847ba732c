package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// ResidentCount is the number of stores this process has open.
func (db *DB) ResidentCount() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.stores)
}

// size is the number of targets whose lock is held or waited for.
func (l *targetLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// missingNameLookups is how many names the hostile-lookup test asks for: 100,000 by default,
// WALKEEPER_HOSTILE_NAMES=1000000 for the full million.
func missingNameLookups(t *testing.T) int {
	if v := os.Getenv("WALKEEPER_HOSTILE_NAMES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "WALKEEPER_HOSTILE_NAMES")
		return n
	}
	return 100_000
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// walCommitters counts the WAL committer goroutines of every writer in the process. A
// committer that has closed its stopped channel may still be on its way out, so callers wait
// for the count (committersSettle) rather than compare it once.
func walCommitters() int {
	return strings.Count(allStacks(), ".(*writer).runWALCommitter(")
}

// allStacks is every goroutine's stack, however many there are.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// settledCommitters is the WAL committer count once earlier tests' committers are gone: the
// same count for 50 ms, so a committer a loaded machine holds up on its way out after its
// stopped channel closed is not counted.
func settledCommitters() int {
	n, same := walCommitters(), 0
	for deadline := time.Now().Add(5 * time.Second); same < 25 && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
		if m := walCommitters(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// committersSettle waits until exactly want WAL committers are running.
func committersSettle(t *testing.T, what string, want int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s (%d WAL committers running, want %d)", what, walCommitters(), want),
		func() bool { return walCommitters() == want })
}

// fakeClock is a settable Options.Now.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func withClock(c *fakeClock) func(*Options)  { return func(o *Options) { o.Now = c.Now } }
func withMetrics(m *Metrics) func(*Options)  { return func(o *Options) { o.Metrics = m } }
func residentNames(db *DB) []string {
	var out []string
	for _, s := range db.Resident() {
		out = append(out, s.Target().Name)
	}
	return out
}

func TestLookupsOfMissingStoresKeepNothing(t *testing.T) {
	n := missingNameLookups(t)
	db := openTestDB(t, backends(t)["mem"], "w1")
	createGeneric(t, db, "real", false)
	ctx := context.Background()
	before := heapInUse()

	const workers = 8
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += workers {
				tg := Target{Kind: Kinds[i%len(Kinds)], Name: fmt.Sprintf("missing-%d", i)}
				if _, err := db.Open(ctx, tg); !errors.Is(err, ErrNotFound) {
					wrong.Add(1)
				}
				if i%16 == 0 { // the other by-name entry points
					if _, err := db.ReconcileStore(ctx, tg); !errors.Is(err, ErrNotFound) {
						wrong.Add(1)
					}
					if _, err := db.Create(ctx, tg, CreateOptions{Schema: &Schema{}}); err == nil {
						wrong.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, wrong.Load(), "a lookup of a missing store did not answer not found")
	require.Zero(t, db.locks.size(), "per-target locks outlived their lookups")
	require.Equal(t, []string{"real"}, residentNames(db), "only the existing store is resident")
	// A leak of even 16 bytes a name would show as 1.6 MB at 100,000 names.
	grown := heapInUse() - before
	require.Less(t, grown, int64(1<<20), "heap grew by %d bytes over %d lookups", grown, n)
}

func TestIdleStoreIsSealedEvictedAndReopened(t *testing.T) {
	ctx := context.Background()
	url := backends(t)["mem"]
	clock := newFakeClock()
	m := NewMetrics(prometheus.NewRegistry(), nil)
	db, idle := newGenericStore(t, url, "idle", withClock(clock), withMetrics(m), func(o *Options) { o.ResidentIdle = time.Hour })
	busy := createGeneric(t, db, "busy", false)
	appendRows(t, idle, row("a", 1), row("b", 2))
	appendRows(t, busy, row("x", 1))
	committers := settledCommitters()

	clock.Advance(2 * time.Hour)
	openGeneric(t, db, "busy") // used within the hour: stays
	db.evictIdle(ctx)
	require.Equal(t, []string{"busy"}, residentNames(db))
	committersSettle(t, "the evicted store's WAL committer exits", committers-1)
	require.Equal(t, 1.0, testutil.ToFloat64(m.ResidentStores))
	require.Equal(t, 1.0, testutil.ToFloat64(m.ResidentEvictions.WithLabelValues(EvictIdle, "evicted")))

	// The memtable was sealed into a generation and its WAL deleted: another process sees
	// the rows, and nothing is left to replay.
	require.Empty(t, listKeys(t, db.Bucket(), walPrefix(idle.Target(), db.Shard())))
	other := openGeneric(t, openTestDB(t, url, "w2"), "idle")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, other, SourceAll))

	// The handle the caller kept still works: reads see the rows, an append reopens the store
	// and lands in the fresh handle's writer.
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, idle, SourceAll))
	appendRows(t, idle, row("c", 3))
	require.ElementsMatch(t, []string{"busy", "idle"}, residentNames(db))
	fresh := openGeneric(t, db, "idle")
	require.NotSame(t, idle, fresh)
	require.True(t, fresh.HasWriter())
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, fresh, SourceAll))
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, idle, SourceAll))
	res := call(idle.Flush(ctx)).must(t) // through the old handle: seals the fresh writer's row
	require.True(t, res.Sealed)
	require.Equal(t, 1, res.Rows)
}

func TestOpenBeyondMaxEvictsLeastRecentlyUsed(t *testing.T) {
	url := backends(t)["mem"]
	clock := newFakeClock()
	m := NewMetrics(prometheus.NewRegistry(), nil)
	db := openTestDB(t, url, "w1", withClock(clock), withMetrics(m), func(o *Options) { o.ResidentStoresMax = 3 })
	for i := range 5 {
		clock.Advance(time.Second)
		s := createGeneric(t, db, fmt.Sprintf("s%d", i), false)
		appendRows(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
	require.Equal(t, []string{"s2", "s3", "s4"}, residentNames(db))
	clock.Advance(time.Second)
	openGeneric(t, db, "s3") // s2 is now the least recently used
	clock.Advance(time.Second)
	openGeneric(t, db, "s0")
	require.Equal(t, []string{"s0", "s3", "s4"}, residentNames(db))
	require.Equal(t, 3.0, testutil.ToFloat64(m.ResidentEvictions.WithLabelValues(EvictMax, "evicted")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.ResidentStores))

	// The evicted stores' rows were sealed: another process reads them.
	other := openTestDB(t, url, "w2")
	for _, i := range []int{1, 2} {
		require.Equal(t, map[string]int64{fmt.Sprintf("k%d", i): int64(i)},
			allRows(t, openGeneric(t, other, fmt.Sprintf("s%d", i)), SourceAll))
	}
	// Every row written before its store was evicted is readable after it reopens.
	for i := range 5 {
		clock.Advance(time.Second)
		name := fmt.Sprintf("s%d", i)
		require.Equal(t, map[string]int64{fmt.Sprintf("k%d", i): int64(i)}, allRows(t, openGeneric(t, db, name), SourceAll), name)
		require.LessOrEqual(t, db.ResidentCount(), 3)
	}
}

func TestReplacedDeadWriterStopsItsCommitter(t *testing.T) {
	url := backends(t)["mem"]
	base := settledCommitters()
	// Two processes with the same instance id fence each other's writer of the shard.
	db1 := openTestDB(t, url, "w1")
	db2 := openTestDB(t, url, "w1")
	s1 := createGeneric(t, db1, "fenced", false)
	appendRows(t, s1, row("a", 1))
	appendRows(t, openGeneric(t, db2, "fenced"), row("b", 2)) // claims the shard: s1's writer is fenced
	committersSettle(t, "two writers run", base+2)
	appendRows(t, s1, row("c", 3)) // fenced once, then a fresh writer reclaims the shard
	committersSettle(t, "the fenced writer's committer exits", base+2)
	flush(t, s1)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s1, SourceAll))
}

// TestEvictionRacesAppendsReadsAndMerges evicts all the time (two resident stores at most,
// idle after a millisecond) while appenders write unique keys through fresh and long-held
// handles, readers read every acknowledged key back, and (in one variant) merges run. No
// acknowledged row may be lost, none sealed twice, and no WAL committer may outlive its store.
func TestEvictionRacesAppendsReadsAndMerges(t *testing.T) {
	for _, merges := range []bool{false, true} {
		t.Run(fmt.Sprintf("merges=%v", merges), func(t *testing.T) {
			testEvictionRaces(t, merges)
		})
	}
}

func testEvictionRaces(t *testing.T, merges bool) {
	ctx := context.Background()
	url := backends(t)["mem"]
	base := settledCommitters()
	m := NewMetrics(prometheus.NewRegistry(), nil)
	db := openTestDB(t, url, "w1", withMetrics(m), func(o *Options) {
		o.ResidentStoresMax = 2
		o.ResidentIdle = time.Millisecond
	})
	const (
		nStores   = 5
		appenders = 6
		perWriter = 40
	)
	names := make([]string, nStores)
	held := make([]*Store, nStores)
	for i := range names {
		names[i] = fmt.Sprintf("race%d", i)
		held[i] = createGeneric(t, db, names[i], false)
	}
	var (
		mu    sync.Mutex
		acked = map[string]map[string]int64{} // store -> key -> value
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		errs  = make(chan error, 64)
	)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				si := (g + i) % nStores
				s := held[si] // odd appenders keep the handle they got at the start
				if g%2 == 0 {
					var err error
					if s, err = db.Open(ctx, Target{Kind: KindGeneric, Name: names[si]}); err != nil {
						report(err)
						return
					}
				}
				key := fmt.Sprintf("g%d-%d", g, i)
				if _, err := s.Append(ctx, []Row{row(key, int64(g*1000+i))}); err != nil {
					report(fmt.Errorf("append %s to %s: %w", key, names[si], err))
					return
				}
				mu.Lock()
				if acked[names[si]] == nil {
					acked[names[si]] = map[string]int64{}
				}
				acked[names[si]][key] = int64(g*1000 + i)
				mu.Unlock()
				// Read your write, through a handle that may be evicted by now.
				if _, err := held[si].Get(ctx, key); err != nil {
					report(fmt.Errorf("get %s from %s right after its append: %w", key, names[si], err))
					return
				}
			}
		}()
	}
	var bg sync.WaitGroup
	if merges {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s, err := db.Open(ctx, Target{Kind: KindGeneric, Name: names[i%nStores]})
				if err == nil {
					_, err = s.MergeAll(ctx)
				}
				if err != nil && !errors.Is(err, ErrStalePreparation) && !errors.Is(err, ErrConflict) {
					report(fmt.Errorf("merge: %w", err))
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	bg.Add(1)
	go func() { // the flush sweeper's part: seal whatever is resident
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, s := range db.Resident() {
				if _, err := s.Flush(ctx); err != nil {
					report(fmt.Errorf("flush %s: %w", s.Target(), err))
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// Idle after a millisecond: the janitor evicts everything, and every writer goroutine ends.
	waitFor(t, "every store is evicted", func() bool { return db.ResidentCount() == 0 })
	committersSettle(t, "the evicted stores' WAL committers exit", base)
	evictions := func(reason, result string) float64 {
		return testutil.ToFloat64(m.ResidentEvictions.WithLabelValues(reason, result))
	}
	require.Positive(t, evictions(EvictMax, "evicted")+evictions(EvictIdle, "evicted"))
	t.Logf("evictions: %v beyond the max, %v idle", evictions(EvictMax, "evicted"), evictions(EvictIdle, "evicted"))
	require.Zero(t, evictions(EvictMax, "failed"))
	require.Zero(t, evictions(EvictIdle, "failed"))

	// Every acknowledged row is sealed: another process reads them all, and nothing is left
	// in the WAL.
	other := openTestDB(t, url, "w2")
	total := 0
	for _, name := range names {
		want := acked[name]
		total += len(want)
		require.Equal(t, want, allRows(t, openGeneric(t, other, name), SourceAll), name)
		require.Empty(t, listKeys(t, db.Bucket(), walPrefix(Target{Kind: KindGeneric, Name: name}, db.Shard())), "%s has unsealed WAL", name)
		if merges {
			continue
		}
		// Each key was appended once, so a row sealed twice would show in the generations'
		// row count.
		sh := call(openGeneric(t, other, name).loadShard(ctx, db.Shard())).must(t)
		sealed := int64(0)
		for _, g := range sh.Flushed {
			sealed += g.Rows
		}
		require.Equal(t, int64(len(want)), sealed, "%s: rows in generations", name)
	}
	require.Equal(t, appenders*perWriter, total)
}

// TestFindingAppendInFlightKeepsItsStoreResident: an eviction that found an append queued for
// its store's writer stopped the writer under it, and the append moved on to the next
// writer; four such evictions in a row (a store idle after a millisecond, on a loaded
// machine) answered a client "closed" for a store nobody closed. An append now pins its
// store's writer until it is answered, and an eviction leaves a pinned store resident.
func TestFindingAppendInFlightKeepsItsStoreResident(t *testing.T) {
	ctx := context.Background()
	now := time.Now() // a clock that stands still: only the pin can save the store
	db := openTestDB(t, newMemURL(), "w", func(o *Options) {
		o.ResidentStoresMax, o.ResidentIdle = 1, 0
		o.Now = func() time.Time { return now }
	})
	s := createGeneric(t, db, "busy", false)
	appendRows(t, s, row("a", 1))

	var step atomic.Int32 // 0: off; 1: the next WAL write waits for release; 2: past it
	inWAL, release := make(chan struct{}), make(chan struct{})
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") && step.CompareAndSwap(1, 2) {
			close(inWAL)
			<-release
		}
		return nil
	}})
	step.Store(1)
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, []Row{row("b", 2)})
		appended <- err
	}()
	<-inWAL

	created := make(chan error, 1)
	go func() { // over the max: tries to evict "busy" while its append is in the WAL write
		_, err := db.Create(ctx, Target{Kind: KindGeneric, Name: "other"}, CreateOptions{Schema: &testSchema})
		created <- err
	}()
	var createErr error
	waitFor(t, "the create's eviction to end or to stop the writer", func() bool {
		select {
		case createErr = <-created:
			return true
		default:
			_, evicted := s.handle()
			return evicted
		}
	})
	_, evicted := s.handle()
	close(release)
	require.False(t, evicted, "an eviction took a store with an append in flight")
	require.NoError(t, createErr)
	require.NoError(t, <-appended)
	require.ElementsMatch(t, []string{"busy", "other"}, residentNames(db), "the store being written stays resident")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceAll))
}

func TestCloseWaitsForEvictionsAndStopsTheJanitor(t *testing.T) {
	ctx := context.Background()
	base := settledCommitters()
	db, err := OpenDB(ctx, backends(t)["mem"], func() Options {
		o := DefaultOptions()
		o.ResidentIdle = time.Millisecond
		return o
	}())
	require.NoError(t, err)
	for i := range 4 {
		appendRows(t, createGeneric(t, db, fmt.Sprintf("c%d", i), false), row("k", int64(i)))
	}
	require.NoError(t, db.Close(ctx))
	committersSettle(t, "Close stops every WAL committer", base)
	select {
	case <-db.janitorDone:
	default:
		t.Fatal("the janitor outlived Close")
	}
	require.ErrorIs(t, errOf(db.Open(ctx, Target{Kind: KindGeneric, Name: "c0"})), ErrClosed)
}

func TestTargetLocksAreFreedAfterUse(t *testing.T) {
	var l targetLocks
	a, b := Target{Kind: KindGeneric, Name: "a"}, Target{Kind: KindGeneric, Name: "b"}
	unlockA := l.lock(a)
	waiting := make(chan struct{})
	got := make(chan struct{})
	go func() {
		close(waiting)
		unlock := l.lock(a) // waits for the first holder
		close(got)
		unlock()
	}()
	<-waiting
	l.lock(b)()
	require.Equal(t, 1, l.size()) // b came and went; a is held
	select {
	case <-got:
		t.Fatal("two holders of one target lock")
	default:
	}
	unlockA()
	<-got
	waitFor(t, "the waiter releases", func() bool { return l.size() == 0 })
}

// TestFindingEvictionWhoseFinalSealFailsKeepsRowsReadable: an eviction's first seal succeeds,
// an append lands after it, and the final seal, which holds that acknowledged row, fails (a
// storage fault). The eviction dropped the handle and its writer anyway: the row was in the WAL
// only, read nowhere, and replayed only by the next write here or a restart, which for an idle
// store may never come. Now the store stays resident with the dead writer's rows readable, and
// the next flush or eviction claims the shard, replays the WAL and seals them.
func TestFindingEvictionWhoseFinalSealFailsKeepsRowsReadable(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	now := time.Now() // a clock that stands still: the late append does not make the store recent again
	db := openTestDB(t, url, "w", func(o *Options) {
		o.ResidentStoresMax, o.ResidentIdle = 1, 0
		o.Now = func() time.Time { return now }
	})
	s := createGeneric(t, db, "evicted", false)
	appendRows(t, s, row("a", 1))

	var step atomic.Int32 // 0: off; 1: the first seal's publish; 2: the final seal's generation
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		switch {
		case op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && err == nil && step.CompareAndSwap(1, 2):
			_, aerr := s.Append(ctx, []Row{row("late", 2)}) // acknowledged after the first seal froze its rows
			require.NoError(t, aerr)
		case op == objstore.OpPut && strings.Contains(key, "/gen/") && step.Load() == 2:
			return errors.New("injected: the final seal's generation write fails")
		}
		return err
	}})
	step.Store(1)
	createGeneric(t, db, "other", false) // over the max: evicts "evicted", in this call
	require.Equal(t, int32(2), step.Load(), "the late append ran inside the eviction")

	requireGetN(t, openGeneric(t, db, "evicted"), "late", 2, "an acknowledged row is read in its own process")

	step.Store(0)
	createGeneric(t, db, "third", false) // evicts the others: the dead writer's WAL is replayed and sealed first
	reader := openGeneric(t, openTestDB(t, url, "r"), "evicted")
	require.Equal(t, map[string]int64{"a": 1, "late": 2}, allRows(t, reader, SourceAll), "and sealed for every reader")
}

// TestFindingEvictionAtPendingMaxKeepsUnsealedRows: a store whose shard is at PendingMax holds
// rows its seals may not write yet (admitted below the limit). Evicting it found every seal
// "done" and dropped the writer with them: clients refused at the limit stop writing, the
// store goes idle, and its acknowledged rows were read nowhere until the next write here or a
// restart. Such a store now stays resident until a seal has written them.
func TestFindingEvictionAtPendingMaxKeepsUnsealedRows(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	var later atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	db := openTestDB(t, url, "w", func(o *Options) { o.ResidentStoresMax, o.ResidentIdle, o.PendingMax, o.Now = 1, 0, 3, clock })
	s := createGeneric(t, db, "held", false)
	sealGenerations(t, s, 2)
	appendRows(t, s, row("waiting", 1)) // admitted below the limit
	db.opts.PendingMax = 2              // then the limit is met: no seal may write it

	createGeneric(t, db, "other", false) // over the max: tries to evict "held"
	requireGetN(t, openGeneric(t, db, "held"), "waiting", 1, "an acknowledged row is read in its own process")

	merger := openGeneric(t, openTestDB(t, url, "m"), "held")
	call(merger.MergeAll(ctx)).must(t)
	later.Add(int64(manifestRefreshEvery)) // the eviction's seal read the manifest just now
	require.NoError(t, errOf(openGeneric(t, db, "held").Flush(ctx)))
	require.Equal(t, map[string]int64{"k0": 0, "k1": 1, "waiting": 1}, allRows(t, merger, SourceAll), "sealed once merges made room")
}

// TestFindingReleaseDuringEvictionLeavesNoRowUnread: a WAL release publishes the next writer
// epoch, which fences the shard's owner. Landing between an eviction's first and final seal, it
// made the final seal fenced, and the eviction took that for a new owner that replays the WAL:
// it dropped the writer, and the rows above the first seal were read nowhere until this
// process wrote the store again. Now such an eviction keeps the store resident with the dead
// writer's rows readable, and the next one claims the shard, replays the WAL and seals it; a
// fence by a real new owner, whose claim replays the WAL (its fence marker, or its seal, lies
// above every object the writer wrote), still lets the eviction finish.
func TestFindingReleaseDuringEvictionLeavesNoRowUnread(t *testing.T) {
	for _, fencer := range []string{"release", "new owner", "new owner that sealed"} {
		t.Run(fencer, func(t *testing.T) {
			ctx := context.Background()
			url := newMemURL()
			now := time.Now() // a clock that stands still: the late append does not make the store recent again
			m := NewMetrics(prometheus.NewRegistry(), nil)
			db := openTestDB(t, url, "w", withMetrics(m), func(o *Options) {
				o.ResidentStoresMax, o.ResidentIdle = 1, 0
				o.Now = func() time.Time { return now }
			})
			s := createGeneric(t, db, "evicted", false)
			appendRows(t, s, row("a", 1))
			operator := openGeneric(t, openTestDB(t, url, "walkeeper-quarantine"), "evicted")
			owner := openGeneric(t, openTestDB(t, url, "w"), "evicted") // the same instance id: the same shard

			var step atomic.Int32 // 0: off; 1: waits for the first seal's publish; 2: past it
			db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && err == nil && step.CompareAndSwap(1, 2) {
					res, aerr := s.Append(ctx, []Row{row("late", 2)}) // acknowledged after the first seal froze its rows
					require.NoError(t, aerr)
					if fencer != "release" {
						appendRows(t, owner, row("b", 3)) // claims the shard and replays "late"
						if fencer == "new owner that sealed" {
							flush(t, owner) // and deletes the WAL, its fence marker too
						}
						return err
					}
					wal := walKey(s.Target(), db.Shard(), res.WALPosition)
					_, qerr := operator.Quarantine(ctx, wal, "set aside by mistake")
					require.NoError(t, qerr)
					_, rerr := operator.Release(ctx, wal) // publishes the next writer epoch
					require.NoError(t, rerr)
				}
				return err
			}})
			step.Store(1)
			createGeneric(t, db, "other", false) // over the max: evicts "evicted", in this call
			require.Equal(t, int32(2), step.Load(), "the fence landed inside the eviction")
			step.Store(0)
			evictions := func(result string) float64 {
				return testutil.ToFloat64(m.ResidentEvictions.WithLabelValues(EvictMax, result))
			}

			if fencer != "release" {
				require.Equal(t, 1.0, evictions("evicted"), "the new owner replays the WAL: the eviction is done")
				epoch := func() uint64 { return call(owner.loadShard(ctx, db.Shard())).must(t).WriterEpoch }
				before := epoch()
				createGeneric(t, db, "third", false)
				require.Equal(t, before, epoch(), "the evicting process does not claim the shard back")
				require.Equal(t, map[string]int64{"a": 1, "late": 2, "b": 3}, allRows(t, owner, SourceAll))
				return
			}

			requireGetN(t, openGeneric(t, db, "evicted"), "late", 2, "an acknowledged row is read in its own process")
			require.Equal(t, 1.0, evictions("failed"), "nobody replays the WAL: the store stays resident")

			createGeneric(t, db, "third", false) // evicts the others: the dead writer's WAL is replayed and sealed first
			require.Equal(t, []string{"third"}, residentNames(db))
			require.Equal(t, 1.0, evictions("failed"))
			require.Empty(t, listKeys(t, db.Bucket(), walPrefix(s.Target(), db.Shard())), "every WAL object is sealed and deleted")
			reader := openGeneric(t, openTestDB(t, url, "r"), "evicted")
			require.Equal(t, map[string]int64{"a": 1, "late": 2}, allRows(t, reader, SourceAll), "and sealed for every reader")
		})
	}
}

// TestFindingReleaseBeforeEvictionAtPendingMaxIsNoticed: at PendingMax a seal publishes
// nothing, so no seal of an eviction read the writer epoch, and a writer fenced by a WAL
// release (its claim had skipped the object while it was set aside) was evicted as if it had
// sealed everything: the released rows were read nowhere until this process wrote the store
// again. The eviction now reads the epoch when its writer's WAL stays above the replay point.
func TestFindingReleaseBeforeEvictionAtPendingMaxIsNoticed(t *testing.T) {
	ctx := context.Background()
	url, wal, operator := walSetAsideAtPendingMax(t)

	db := openTestDB(t, url, "w", func(o *Options) { o.ResidentStoresMax, o.ResidentIdle, o.PendingMax = 1, 0, 2 })
	_, err := openGeneric(t, db, "held").Append(ctx, []Row{row("y", 8)}) // claims the shard past "x", then is refused
	require.ErrorIs(t, err, ErrTooManyPending)
	require.NoError(t, errOf(operator.Release(ctx, wal))) // fences the writer, which has not read the manifest since

	createGeneric(t, db, "other", false) // over the max: tries to evict "held"
	createGeneric(t, db, "third", false) // and again: this eviction claims the shard and replays "x"
	requireGetN(t, openGeneric(t, db, "held"), "x", 7, "the released row is read by the shard's owner")
}

// TestFindingDeadWriterIsNotClaimedFromItsNewOwner: a writer fenced by a live process with the
// same instance id (its claim replayed the writer's WAL) stays dead in a resident store. The
// next eviction, or the flush sweeper's seal of its rows, claimed the shard back without
// asking whether that owner replays the WAL, fencing a live process for rows it already had.
// Both now leave the shard to it, and the eviction finishes.
func TestFindingDeadWriterIsNotClaimedFromItsNewOwner(t *testing.T) {
	for _, by := range []string{"eviction", "sweeper"} {
		t.Run(by, func(t *testing.T) {
			ctx := context.Background()
			url := newMemURL()
			m := NewMetrics(prometheus.NewRegistry(), nil)
			db := openTestDB(t, url, "w", withMetrics(m), func(o *Options) { o.ResidentStoresMax, o.ResidentIdle = 1, 0 })
			s := createGeneric(t, db, "fenced", false)
			appendRows(t, s, row("a", 1))
			owner := openGeneric(t, openTestDB(t, url, "w"), "fenced") // the same instance id: the same shard
			appendRows(t, owner, row("b", 2))                          // claims the shard and replays "a"
			require.ErrorIs(t, errOf(s.Flush(ctx)), ErrFenced, "the seal finds the new owner's epoch: the writer is dead")
			require.True(t, s.HoldsOrphanedRows(), "not known yet whether anybody replays its rows")
			epoch := func() uint64 { return call(owner.loadShard(ctx, db.Shard())).must(t).WriterEpoch }
			before := epoch()

			if by == "sweeper" {
				require.NoError(t, errOf(s.Flush(ctx))) // what the flush sweeper's next pass does with such a store
				require.Equal(t, before, epoch(), "the seal leaves the shard to its new owner")
				require.False(t, s.HoldsOrphanedRows(), "and the sweeper passes it by from now on")
			}
			createGeneric(t, db, "other", false) // over the max: evicts "fenced"
			require.Equal(t, before, epoch(), "the eviction leaves the shard to its new owner")
			require.Equal(t, []string{"other"}, residentNames(db))
			require.Equal(t, 1.0, testutil.ToFloat64(m.ResidentEvictions.WithLabelValues(EvictMax, "evicted")))
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, owner, SourceAll))
		})
	}
}

// TestFindingSweeperReplaysAWALReleasedAtPendingMax: an eviction at PendingMax that notices a
// WAL release's fence keeps the store resident with a dead writer that holds no row, only
// WAL above the replay point (its fence marker, and the released object below it). The flush
// sweeper's seal of such a store claims the shard, so the released row is read by its owner
// without waiting for another eviction.
func TestFindingSweeperReplaysAWALReleasedAtPendingMax(t *testing.T) {
	ctx := context.Background()
	url, wal, operator := walSetAsideAtPendingMax(t)

	db := openTestDB(t, url, "w", func(o *Options) { o.ResidentStoresMax, o.ResidentIdle, o.PendingMax = 1, 0, 2 })
	held := openGeneric(t, db, "held")
	_, err := held.Append(ctx, []Row{row("y", 8)}) // claims the shard past "x", then is refused
	require.ErrorIs(t, err, ErrTooManyPending)
	call(operator.Release(ctx, wal)).must(t)
	createGeneric(t, db, "other", false) // over the max: the eviction of "held" is fenced and fails
	require.False(t, held.HasWriter())

	require.True(t, held.HoldsOrphanedRows(), "the flush sweeper seals it")
	flush(t, held)
	requireGetN(t, held, "x", 7, "the released row is read by the shard's owner")
}

// walSetAsideAtPendingMax builds store "held" on a new mem:// bucket: two generations and a WAL
// object holding row "x" that a process with instance id "w" wrote and died before sealing,
// set aside by an operator, so that a claim by "w" skips it. It returns the bucket, the WAL
// object's key and the operator's handle.
func walSetAsideAtPendingMax(t *testing.T) (url, wal string, operator *Store) {
	t.Helper()
	ctx := context.Background()
	url = newMemURL()
	old := createGeneric(t, openTestDB(t, url, "w"), "held", false)
	sealGenerations(t, old, 2)
	wal = walKey(old.Target(), old.db.Shard(), call(old.Append(ctx, []Row{row("x", 7)})).must(t).WALPosition)
	operator = openGeneric(t, openTestDB(t, url, "walkeeper-quarantine"), "held")
	call(operator.Quarantine(ctx, wal, "damaged")).must(t)
	return url, wal, operator
}
