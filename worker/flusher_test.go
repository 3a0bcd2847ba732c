package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// testDB opens a real store.DB on a fresh file:// root with one rollout and one generic store.
func testDB(t *testing.T, m *Metrics) (*store.DB, *store.Store, *store.Store) {
	t.Helper()
	opts := store.DefaultOptions()
	opts.InstanceID = "sweeper-test"
	opts.Logger = zaptest.NewLogger(t)
	if m != nil {
		opts.Metrics = m.Store
	}
	url := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	db, err := store.OpenDB(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	ctx := context.Background()
	ro, err := db.Create(ctx, store.Target{Kind: store.KindRollout, Name: "slow"}, store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sch := store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}
	ge, err := db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: "fast"}, store.CreateOptions{Schema: &sch})
	if err != nil {
		t.Fatal(err)
	}
	return db, ro, ge
}

// testFlusher is NewFlusher of o, sweeping hourly (tests call FlushKind or FlushOnce) unless
// o says otherwise, logging to t unless o has a logger, and stopped when t ends.
func testFlusher(t *testing.T, o FlusherOptions) *Flusher {
	t.Helper()
	o.Interval = cmp.Or(o.Interval, time.Hour)
	if o.Logger == nil {
		o.Logger = zaptest.NewLogger(t)
	}
	fl := NewFlusher(o)
	stopAtCleanup(t, "flusher Stop", fl.Stop)
	return fl
}

// appendIDs appends one row per id (both test schemas need only the key) through the codec.
func appendIDs(t *testing.T, s *store.Store, ids ...string) {
	t.Helper()
	var objs []map[string]string
	for _, id := range ids {
		objs = append(objs, map[string]string{"id": id})
	}
	body, _ := json.Marshal(objs)
	rows, err := s.Codec().DecodeJSON(body, 0)
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if _, err := s.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// wedgedFlusher starts a flusher whose rollout stores' seals wedge, ignoring their context,
// until release is closed; it counts the entries into them and the generic flushes that succeed.
func wedgedFlusher(t *testing.T, m *Metrics, db *store.DB, timeout time.Duration, release chan struct{}) (roEntered, geFlushes *atomic.Int32) {
	t.Helper()
	roEntered, geFlushes = new(atomic.Int32), new(atomic.Int32)
	fl := testFlusher(t, FlusherOptions{
		Interval: 10 * time.Millisecond,
		Timeout:  timeout,
		Metrics:  m,
		Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			if s.Target().Kind == store.KindRollout {
				roEntered.Add(1)
				<-release
			}
			res, err := s.Flush(ctx)
			if s.Target().Kind == store.KindGeneric && err == nil {
				geFlushes.Add(1)
			}
			return res, err
		},
	})
	fl.Start(context.Background())
	return roEntered, geFlushes
}

// A wedged store of one kind must not delay the seals of another kind: the kinds run in their
// own loops. The wedge outlasts the test and its timeout is an hour, so a flusher that waited
// for it, or for its timeout, would seal nothing more here whatever the machine's load.
func TestFlusherSlowKindDoesNotDelayOtherKinds(t *testing.T) {
	m := NewMetrics(nil)
	db, ro, ge := testDB(t, m)
	appendIDs(t, ro, "r1")
	appendIDs(t, ge, "g1")
	release := make(chan struct{})
	defer close(release)
	roEntered, geFlushes := wedgedFlusher(t, m, db, time.Hour, release)

	waitUntil(t, "wedged rollout seal", func() bool { return roEntered.Load() == 1 })
	before := geFlushes.Load()
	waitUntil(t, "five generic flushes while the rollout store is wedged", func() bool { return geFlushes.Load() >= before+5 })
	appendIDs(t, ge, "g2")
	waitUntil(t, "seal of the generic row appended during the wedge", func() bool {
		st, err := ge.Stats(context.Background())
		return err == nil && st.Totals.PendingGenerations >= 2
	})
}

// A seal past the timeout is abandoned for the tick, counted once, and its store is skipped
// (not entered again) while the abandoned seal runs; once it returns the store is swept again.
func TestFlusherAbandonsAWedgedSealOnce(t *testing.T) {
	m := NewMetrics(nil)
	db, ro, _ := testDB(t, m)
	appendIDs(t, ro, "r1")
	release := make(chan struct{})
	unwedge := sync.OnceFunc(func() { close(release) })
	defer unwedge() // on a failure too, so the flusher's Stop is not held by the wedge
	roEntered, _ := wedgedFlusher(t, m, db, 100*time.Millisecond, release)

	waitUntil(t, "timeout of the wedged seal", func() bool {
		return testutil.ToFloat64(m.flusherTimeouts.WithLabelValues("rollout")) >= 1
	})
	waitUntil(t, "skip of the wedged store", func() bool {
		return testutil.ToFloat64(m.flusherSkipped.WithLabelValues("rollout")) >= 1
	})
	if n := roEntered.Load(); n != 1 {
		t.Fatalf("wedged store entered %d times, want 1", n)
	}
	if got := testutil.ToFloat64(m.flusherTimeouts.WithLabelValues("rollout")); got != 1 {
		t.Fatalf("rollout timeouts = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("rollout", "timeout")); got != 1 {
		t.Fatalf(`walkeeper_flush_total{kind="rollout",result="timeout"} = %v`, got)
	}

	unwedge()
	waitUntil(t, "new sweep of the rollout store after its abandoned seal returned", func() bool { return roEntered.Load() >= 2 })
}

func TestFlusherStartWithZeroIntervalIsOff(t *testing.T) {
	called := atomic.Int32{}
	sw := NewFlusher(FlusherOptions{Resident: func() []*store.Store { called.Add(1); return nil }})
	sw.Start(context.Background())
	time.Sleep(20 * time.Millisecond)
	if err := sw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if called.Load() != 0 {
		t.Fatal("a flusher with interval 0 flushed")
	}
}

// A slow Temporal frontend never holds the flusher: starts run in the background, one per
// target, so the next store of the same kind is sealed at once.
func TestSlowMergeStartDoesNotDelaySeals(t *testing.T) {
	db, _, ge := testDB(t, nil)
	sch := store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}
	other, err := db.Create(context.Background(), store.Target{Kind: store.KindGeneric, Name: "other"}, store.CreateOptions{Schema: &sch})
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, ge, "g1")
	appendIDs(t, other, "o1")
	release := make(chan struct{})
	rs := &recStarter{}
	slow := func(ctx context.Context, tg store.Target, in contract.MergeWalInput, _ ...contract.StartOption) (client.WorkflowRun, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return rs.start(ctx, tg, in)
	}
	var sealed atomic.Int32
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: slow,
		Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			res, err := s.Flush(ctx)
			if err == nil && res.Sealed {
				sealed.Add(1)
			}
			return res, err
		}})
	// The starts hang until release: a flush pass that waited for them would never return.
	swept := make(chan struct{})
	go func() {
		sw.FlushKind(context.Background(), store.KindGeneric)
		close(swept)
	}()
	select {
	case <-swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the flush pass waited for hung merge starts")
	}
	if sealed.Load() != 2 {
		t.Fatalf("sealed %d stores, want 2", sealed.Load())
	}
	// A second flush pass while the starts still hang does not pile up more starts.
	appendIDs(t, ge, "g2")
	sw.FlushKind(context.Background(), store.KindGeneric)
	close(release)
	sw.triggers.wg.Wait()
	if rs.count() != 2 {
		t.Fatalf("starts = %d, want one per store", rs.count())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// The flusher seals only stores with a writer in this process: a store resident only because
// it was read, scanned or merged costs no listing of its WAL per tick. Rows a crashed earlier
// run left in the WAL are still sealed: DB.Recover replays them at worker start.
func TestFlusherSkipsStoresWithoutWriterAndRecoverSealsCrashWAL(t *testing.T) {
	ctx := context.Background()
	root := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	open := func() *store.DB {
		opts := store.DefaultOptions()
		opts.InstanceID = "sweeper-crash"
		opts.Logger = zaptest.NewLogger(t)
		db, err := store.OpenDB(ctx, root, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	// The first run appends (durable in its WAL) and dies before any seal.
	crashed := open()
	sch := store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}
	ge, err := crashed.Create(ctx, store.Target{Kind: store.KindGeneric, Name: "g"}, store.CreateOptions{Schema: &sch})
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, ge, "lost-1", "lost-2")
	if _, err := crashed.Create(ctx, store.Target{Kind: store.KindRollout, Name: "r"}, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The next run of the same instance opens both stores for reads only.
	db := open()
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	for _, tg := range []store.Target{{Kind: store.KindGeneric, Name: "g"}, {Kind: store.KindRollout, Name: "r"}} {
		s, err := db.Open(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		if s.HasWriter() {
			t.Fatalf("%s: opening for reads made a writer", tg)
		}
	}
	var flushed atomic.Int32
	sw := testFlusher(t, FlusherOptions{Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			flushed.Add(1)
			return s.Flush(ctx)
		}})
	sw.FlushOnce(ctx)
	if n := flushed.Load(); n != 0 {
		t.Fatalf("swept %d stores without a writer", n)
	}

	n, err := db.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Recover sealed %d stores, want the one with crash WAL", n)
	}
	s, err := db.Open(ctx, store.Target{Kind: store.KindGeneric, Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalPending() != 1 {
		t.Fatalf("pending after Recover = %d, want the crash WAL sealed into 1 generation", st.TotalPending())
	}
	if _, err := s.Get(ctx, "lost-2"); err != nil {
		t.Fatalf("row from the crashed run: %v", err)
	}
	// Recover claimed the writer, so the flusher seals this store from now on.
	appendIDs(t, s, "after")
	sw.FlushOnce(ctx)
	if n := flushed.Load(); n != 1 {
		t.Fatalf("swept %d stores after Recover, want the one with a writer", n)
	}
}

// FlushOnce flushes every kind concurrently and returns when all three passes, and the merge
// starts they triggered, are done.
func (fl *Flusher) FlushOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, k := range store.Kinds {
		wg.Go(func() { fl.FlushKind(ctx, k) })
	}
	wg.Wait()
	fl.triggers.wg.Wait()
}

// A seal whose storage write never answers must not keep its store skipped for ever: the
// bucket's stall timeout fails the abandoned seal (a typed error, counted as a failed
// flush), and a later pass seals the store.
func TestFlusherSealHungOnStorageFailsAndALaterPassSeals(t *testing.T) {
	ctx := context.Background()
	var hang atomic.Bool
	hang.Store(true)
	raw, err := objstore.OpenBucket(ctx, fmt.Sprintf("mem://flush-hang-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	b := raw.WithFaults(objstore.HangFaults{Hang: func(op, key string) bool {
		return hang.Load() && op == objstore.OpPut && strings.Contains(key, "/gen/")
	}})
	m := NewMetrics(nil)
	opts := store.DefaultOptions()
	opts.InstanceID = "hang-test"
	opts.Logger = zaptest.NewLogger(t)
	opts.Metrics = m.Store
	opts.StorageStallTimeout = 2 * time.Second // long enough that no other operation stalls on a loaded machine
	db := store.OpenDBOnBucket(b, opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	sch := store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}
	ge, err := db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: "hung"}, store.CreateOptions{Schema: &sch})
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, ge, "g1")

	var mu sync.Mutex
	var sealErr error
	sealed := make(chan struct{})
	fl := testFlusher(t, FlusherOptions{
		Timeout:  time.Millisecond, // every pass abandons the hung seal at once
		Metrics:  m,
		Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			res, err := s.Flush(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && sealErr == nil {
				sealErr = err
				hang.Store(false) // the storage answers again
			}
			if res.Sealed {
				close(sealed)
			}
			return res, err
		},
	})
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		fl.FlushKind(ctx, store.KindGeneric)
		select {
		case <-sealed:
			done = true
		case <-deadline:
			t.Fatalf("store not sealed after 30s of passes (skipped %v times): the hung seal held it",
				testutil.ToFloat64(m.flusherSkipped.WithLabelValues("generic")))
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(sealErr, store.ErrStalled) {
		t.Fatalf("the hung seal failed with %v, want store.ErrStalled", sealErr)
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("generic", "failed")); got < 1 {
		t.Fatalf("walkeeper_flush_total{result=failed} = %v, want the stalled seal counted", got)
	}
}
