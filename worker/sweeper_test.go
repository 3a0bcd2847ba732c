package worker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
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

// appendIDs appends one row per id (both test schemas need only the key) through the codec.
func appendIDs(t *testing.T, s *store.Store, ids ...string) {
	t.Helper()
	body := "["
	for i, id := range ids {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"id":%q}`, id)
	}
	body += "]"
	rows, err := s.Codec().DecodeJSON([]byte(body), 0)
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if _, err := s.Append(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// A wedged store of one kind must not delay the seal of another kind: the kinds run in their
// own loops, and the wedged store is abandoned after the per-store timeout and then skipped.
func TestSweeperSlowKindDoesNotDelayOtherKinds(t *testing.T) {
	m := NewMetrics(nil)
	db, ro, ge := testDB(t, m)
	appendIDs(t, ro, "r1")
	appendIDs(t, ge, "g1")

	release := make(chan struct{})
	var roEntered atomic.Int32
	var geFlushes atomic.Int32
	geSealed := make(chan float64, 1) // rollout timeouts seen when generic first sealed
	sw := NewSweeper(SweeperOptions{
		Interval: 10 * time.Millisecond,
		Timeout:  time.Second,
		Logger:   zaptest.NewLogger(t),
		Metrics:  m,
		Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			if s.Target().Kind == store.KindRollout {
				roEntered.Add(1)
				<-release // wedged until the test lets go (ignores ctx on purpose)
			}
			res, err := s.Flush(ctx)
			if s.Target().Kind == store.KindGeneric {
				geFlushes.Add(1)
				if res.Sealed {
					select {
					case geSealed <- testutil.ToFloat64(m.sweeperTimeouts.WithLabelValues("rollout")):
					default:
					}
				}
			}
			return res, err
		},
	})
	sw.Start(context.Background())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sw.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()

	select {
	case timeouts := <-geSealed:
		// Sealed before the wedged rollout store was even abandoned.
		if timeouts != 0 {
			t.Fatal("generic store sealed only after the wedged rollout store timed out")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("generic store never sealed while a rollout store was wedged")
	}
	// The generic loop keeps ticking while rollout is still wedged.
	deadline := time.Now().Add(5 * time.Second)
	for geFlushes.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if geFlushes.Load() < 5 {
		t.Fatalf("generic flushed %d times while rollout was wedged", geFlushes.Load())
	}
	// The wedged store timed out once, and is skipped (not re-entered) while its seal runs.
	for testutil.ToFloat64(m.sweeperTimeouts.WithLabelValues("rollout")) < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(m.sweeperTimeouts.WithLabelValues("rollout")); got != 1 {
		t.Fatalf("rollout timeouts = %v, want 1", got)
	}
	for testutil.ToFloat64(m.sweeperSkipped.WithLabelValues("rollout")) < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := roEntered.Load(); n != 1 {
		t.Fatalf("wedged store entered %d times, want 1", n)
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("rollout", "timeout")); got != 1 {
		t.Fatalf(`walkeeper_flush_total{kind="rollout",result="timeout"} = %v`, got)
	}
	if got := testutil.ToFloat64(m.sweeperTimeouts.WithLabelValues("generic")); got != 0 {
		t.Fatalf("generic timeouts = %v", got)
	}

	// Released, the abandoned seal completes and the store is swept again.
	close(release)
	for roEntered.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if roEntered.Load() < 2 {
		t.Fatal("rollout store not swept again after its abandoned seal returned")
	}
}

// SweepOnce runs the kinds concurrently. The rollout store (swept first if kinds ran in order)
// can only finish once the generic store has sealed; run serially, it would sit out its whole
// timeout.
func TestSweepOnceRunsKindsConcurrently(t *testing.T) {
	m := NewMetrics(nil)
	db, ro, ge := testDB(t, m)
	appendIDs(t, ro, "r1")
	appendIDs(t, ge, "g1")
	geSealed := make(chan struct{})
	sw := NewSweeper(SweeperOptions{
		Interval: time.Hour,
		Timeout:  5 * time.Second,
		Logger:   zaptest.NewLogger(t),
		Metrics:  m,
		Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			if s.Target().Kind == store.KindRollout {
				select {
				case <-geSealed:
				case <-ctx.Done():
					return store.FlushResult{}, ctx.Err()
				}
			}
			res, err := s.Flush(ctx)
			if s.Target().Kind == store.KindGeneric && res.Sealed {
				close(geSealed)
			}
			return res, err
		},
	})
	begin := time.Now()
	sw.SweepOnce(context.Background())
	if d := time.Since(begin); d > 4*time.Second {
		t.Fatalf("SweepOnce took %v: kinds ran one after another", d)
	}
	if got := testutil.ToFloat64(m.sweeperTimeouts.WithLabelValues("rollout")); got != 0 {
		t.Fatalf("rollout timed out (%v): it waited for the generic pass", got)
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("rollout", "sealed")); got != 1 {
		t.Fatalf("rollout seals = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// The count trigger starts MergeWal exactly when the own shard's pending count reaches the
// threshold after a seal, and never when the threshold is 0 (off).
func TestCountTriggerFiresAtThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		want      []int // pending counts at which a start happens, for seals 1..5
	}{
		{threshold: 3, want: []int{3, 4, 5}},
		{threshold: 1, want: []int{1, 2, 3, 4, 5}},
		{threshold: 0, want: nil},
	} {
		t.Run(fmt.Sprintf("threshold=%d", tc.threshold), func(t *testing.T) {
			m := NewMetrics(nil)
			db, _, ge := testDB(t, m)
			rs := &recStarter{}
			var pendings []int
			var mu sync.Mutex
			sw := NewSweeper(SweeperOptions{
				Interval: time.Hour, MergeAfterGenerations: tc.threshold, Start: rs.start,
				Logger: zaptest.NewLogger(t), Metrics: m, Resident: db.Resident,
				Observe: func(_ store.Target, res store.FlushResult) {
					mu.Lock()
					pendings = append(pendings, res.Pending)
					mu.Unlock()
				},
			})
			var got []int
			for i := 1; i <= 5; i++ {
				appendIDs(t, ge, fmt.Sprintf("g%d", i))
				before := rs.count()
				sw.SweepOnce(context.Background())
				if rs.count() > before {
					got = append(got, i)
				}
				if rs.count()-before > 1 {
					t.Fatalf("seal %d started %d workflows", i, rs.count()-before)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("starts after seals %v, want %v (pending seen: %v)", got, tc.want, pendings)
			}
			for _, c := range rs.calls {
				if c.target != "generic:fast" || c.in.Target != "generic:fast" {
					t.Fatalf("start call %+v", c)
				}
			}
			// A sweep that seals nothing does not start again.
			before := rs.count()
			sw.SweepOnce(context.Background())
			if rs.count() != before {
				t.Fatal("an empty flush re-triggered MergeWal")
			}
			if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultStarted)); int(got) != len(tc.want) {
				t.Fatalf("trigger_starts_total{count,started} = %v", got)
			}
		})
	}
}

// Without a starter (HTTP-only mode) the trigger is off whatever the threshold.
func TestCountTriggerOffWithoutTemporal(t *testing.T) {
	db, _, ge := testDB(t, nil)
	sw := NewSweeper(SweeperOptions{Interval: time.Hour, MergeAfterGenerations: 1, Resident: db.Resident})
	appendIDs(t, ge, "g1")
	sw.SweepOnce(context.Background()) // must not panic or block
	if sw.trigger.countEnabled() {
		t.Fatal("trigger enabled without a starter")
	}
}

// A failed start is a trigger failure, not a flush failure, and is retried on the next
// successful flush even when that flush seals nothing.
func TestCountTriggerFailureIsNotAFlushFailure(t *testing.T) {
	m := NewMetrics(nil)
	db, _, ge := testDB(t, m)
	rs := &recStarter{}
	rs.setFail(errors.New("temporal unreachable"))
	sw := NewSweeper(SweeperOptions{Interval: time.Hour, MergeAfterGenerations: 1, Start: rs.start,
		Logger: zaptest.NewLogger(t), Metrics: m, Resident: db.Resident})

	appendIDs(t, ge, "g1")
	sw.SweepOnce(context.Background())
	if rs.count() != 1 {
		t.Fatalf("starts = %d, want 1", rs.count())
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("generic", "failed")); got != 0 {
		t.Fatalf("a merge-start failure was counted as a flush failure (%v)", got)
	}
	if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultFailed)); got != 1 {
		t.Fatalf("trigger_starts_total{count,failed} = %v", got)
	}

	rs.setFail(nil)
	sw.SweepOnce(context.Background()) // seals nothing, but the failed start is retried
	if rs.count() != 2 {
		t.Fatalf("starts = %d, want a retry", rs.count())
	}
	sw.SweepOnce(context.Background()) // nothing sealed, nothing to retry
	if rs.count() != 2 {
		t.Fatalf("starts = %d after a successful retry", rs.count())
	}
}

func TestSweeperStartWithZeroIntervalIsOff(t *testing.T) {
	called := atomic.Int32{}
	sw := NewSweeper(SweeperOptions{Resident: func() []*store.Store { called.Add(1); return nil }})
	sw.Start(context.Background())
	time.Sleep(20 * time.Millisecond)
	if err := sw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if called.Load() != 0 {
		t.Fatal("a sweeper with interval 0 swept")
	}
}

// A slow Temporal frontend never holds the sweep: starts run in the background, one per
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
	slow := func(ctx context.Context, tg store.Target, in contract.MergeWalInput) (client.WorkflowRun, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return rs.start(ctx, tg, in)
	}
	var sealed atomic.Int32
	sw := NewSweeper(SweeperOptions{Interval: time.Hour, MergeAfterGenerations: 1, Start: slow,
		Logger: zaptest.NewLogger(t), Resident: db.Resident,
		Observe: func(_ store.Target, res store.FlushResult) {
			if res.Sealed {
				sealed.Add(1)
			}
		}})
	// The starts hang until release: a sweep that waited for them would never return.
	swept := make(chan struct{})
	go func() {
		sw.SweepKind(context.Background(), store.KindGeneric)
		close(swept)
	}()
	select {
	case <-swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep waited for hung merge starts")
	}
	if sealed.Load() != 2 {
		t.Fatalf("sealed %d stores, want 2", sealed.Load())
	}
	// A second sweep while the starts still hang does not pile up more starts.
	appendIDs(t, ge, "g2")
	sw.SweepKind(context.Background(), store.KindGeneric)
	close(release)
	sw.trigger.wait()
	if rs.count() != 2 {
		t.Fatalf("starts = %d, want one per store", rs.count())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// The sweeper seals only stores with a writer in this process. A store that is resident
// only because it was read, scanned or merged costs nothing per tick (before, every tick
// listed its WAL prefix). Rows a crashed earlier run left in
// the WAL are still sealed: DB.Recover replays them at worker start.
func TestSweeperSkipsStoresWithoutWriterAndRecoverSealsCrashWAL(t *testing.T) {
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
	sw := NewSweeper(SweeperOptions{Interval: time.Hour, Logger: zaptest.NewLogger(t), Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			flushed.Add(1)
			return s.Flush(ctx)
		}})
	sw.SweepOnce(ctx)
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
	// Recover claimed the writer, so the sweeper seals this store from now on.
	appendIDs(t, s, "after")
	sw.SweepOnce(ctx)
	if n := flushed.Load(); n != 1 {
		t.Fatalf("swept %d stores after Recover, want the one with a writer", n)
	}
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Count-trigger starts ask for parallel prepares unless the worker is configured serial.
func TestCountTriggerParallelPrepareKnob(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			db, _, ge := testDB(t, nil)
			rs := &recStarter{}
			sw := NewSweeper(SweeperOptions{Interval: time.Hour, MergeAfterGenerations: 1, Start: rs.start,
				SerialPrepare: serial, Logger: zaptest.NewLogger(t), Resident: db.Resident})
			appendIDs(t, ge, "g1")
			sw.SweepOnce(context.Background())
			if rs.count() != 1 {
				t.Fatalf("starts = %d", rs.count())
			}
			if got := rs.calls[0].in.ParallelPrepare; got == serial {
				t.Fatalf("ParallelPrepare = %v with SerialPrepare %v", got, serial)
			}
		})
	}
	if !DefaultConfig().MergeParallelPrepare {
		t.Fatal("parallel prepare is documented as the default")
	}
}
