package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
)

// missingNameRequests is how many requests for missing stores the hostile-lookup test makes:
// 100,000 by default, WALKEEPER_HOSTILE_NAMES=1000000 for the full million.
func missingNameRequests(t *testing.T) int {
	if v := os.Getenv("WALKEEPER_HOSTILE_NAMES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("WALKEEPER_HOSTILE_NAMES: %v", err)
		}
		return n
	}
	return 100_000
}

// serve runs one request through the handler without a network round trip, with the Host a
// client of a loopback worker sends.
func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	return fuzzDo(h, method, path, "", []byte(body))
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Requests naming stores that do not exist, on every per-store route, leave no per-name state
// in the worker: no resident store, no lock, no debt-kick entry, no trigger entry, no metric
// series.
func TestHTTPLookupsOfMissingStoresKeepNothing(t *testing.T) {
	n := missingNameRequests(t)
	cfg := testConfig(t)
	cfg.Storage = "mem://" + strings.ReplaceAll(t.Name(), "/", "-") // the requests, not the disk, are under test
	rs := &recStarter{}
	w := startWorkerLogging(t, cfg, rs.start, zap.NewNop())
	h := w.Handler()
	if rec := serve(h, http.MethodPost, "/api/v1/stores/generic/real", genericSchema); rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/stores/%s/%s/rows/k", ""},
		{http.MethodGet, "/api/v1/stores/%s/%s/rows", ""},
		{http.MethodGet, "/api/v1/stores/%s/%s/stats", ""},
		{http.MethodPost, "/api/v1/stores/%s/%s/flush", ""},
		{http.MethodDelete, "/api/v1/stores/%s/%s/rows/k", ""},
		{http.MethodPost, "/api/v1/stores/%s/%s/rows", `[{"id":"k"}]`},
		{http.MethodPost, "/api/v1/stores/%s/%s/merge-wal", ""},
	}
	// lookup reports with Errorf, since the goroutines below may not call FailNow.
	lookup := func(i int) bool {
		rt := routes[i%len(routes)]
		kind := store.Kinds[i%len(store.Kinds)]
		rec := serve(h, rt.method, fmt.Sprintf(rt.path, kind, fmt.Sprintf("missing-%d", i)), rt.body)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), CodeStoreNotFound) {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, rec.Code, rec.Body)
			return false
		}
		return true
	}
	for i := range 2 * len(routes) { // every route and kind once: their series exist
		if !lookup(i) {
			t.FailNow()
		}
	}
	series := testutil.CollectAndCount(w.Metrics().Registry)
	before := heapInUse()

	const workers = 4
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := g; i < n && lookup(i); i += workers {
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	if got := len(w.DB().Resident()); got != 1 {
		t.Fatalf("%d resident stores after lookups of missing ones, want 1", got)
	}
	if got := w.api.kicks.size(); got != 0 {
		t.Fatalf("%d debt-kick entries", got)
	}
	tg := w.flusher.triggers
	tg.mu.Lock()
	retries, inflight := len(tg.retry), len(tg.inflight)
	tg.mu.Unlock()
	if retries+inflight != 0 {
		t.Fatalf("trigger state for missing stores: %d retries, %d in flight", retries, inflight)
	}
	if rs.count() != 0 {
		t.Fatalf("%d merge starts for missing stores", rs.count())
	}
	if got := testutil.CollectAndCount(w.Metrics().Registry); got != series {
		t.Fatalf("metric series grew from %d to %d: a label carries the name", series, got)
	}
	if grown := heapInUse() - before; grown > 4<<20 {
		t.Fatalf("heap grew by %d bytes over %d requests", grown, n)
	}
}

// Stores are evicted (beyond the max and when idle) while clients append to and read them
// over HTTP; every acknowledged row stays readable, right after its append and after the
// stores were reopened.
func TestHTTPAppendsSurviveEvictions(t *testing.T) {
	cfg := testConfig(t)
	cfg.ResidentStoresMax = 2
	cfg.ResidentIdle = 5 * time.Millisecond
	cfg.FlushInterval = 5 * time.Millisecond
	cfg.MergeAfterGenerations = 3
	rs := &recStarter{}
	w := startWorkerLogging(t, cfg, rs.start, zap.NewNop())
	h := w.Handler()
	const stores, clients, perClient = 4, 4, 25
	for i := range stores {
		if rec := serve(h, http.MethodPost, fmt.Sprintf("/api/v1/stores/generic/s%d", i), genericSchema); rec.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	}
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				base := fmt.Sprintf("/api/v1/stores/generic/s%d/rows", (c+i)%stores)
				id := fmt.Sprintf("c%d-%d", c, i)
				rec := serve(h, http.MethodPost, base, fmt.Sprintf(`[{"id":%q,"n":%d}]`, id, i))
				if rec.Code != http.StatusOK {
					errs <- fmt.Errorf("append %s: %d %s", id, rec.Code, rec.Body)
					return
				}
				if rec := serve(h, http.MethodGet, base+"/"+id, ""); rec.Code != http.StatusOK {
					errs <- fmt.Errorf("get %s after its append: %d %s", id, rec.Code, rec.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	require.Eventually(t, func() bool { return len(w.DB().Resident()) == 0 }, 30*time.Second, 5*time.Millisecond,
		"stores still resident after they went idle")
	sm := w.Metrics().Store
	evicted := testutil.ToFloat64(sm.ResidentEvictions.WithLabelValues(store.EvictMax, "evicted")) +
		testutil.ToFloat64(sm.ResidentEvictions.WithLabelValues(store.EvictIdle, "evicted"))
	if evicted < stores {
		t.Fatalf("%v evictions, want at least one per store", evicted)
	}
	for c := range clients {
		for i := range perClient {
			path := fmt.Sprintf("/api/v1/stores/generic/s%d/rows/c%d-%d", (c+i)%stores, c, i)
			rec := serve(h, http.MethodGet, path, "")
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), fmt.Sprintf(`"n":%d`, i)) {
				t.Fatalf("GET %s after the evictions: %d %s", path, rec.Code, rec.Body)
			}
		}
	}
}

func TestKickLimiterForgetsWhatIsOld(t *testing.T) {
	k := kickLimiter{every: time.Minute}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if !k.allow("a", now) || k.allow("a", now.Add(time.Second)) {
		t.Fatal("a key went twice within every")
	}
	if !k.allow("a", now.Add(time.Minute)) {
		t.Fatal("a key could not go again after every")
	}
	// A stream of distinct keys, 100 a second: the limiter holds at most about the last
	// minute's worth, never all of them.
	peak := 0
	for i := range 100_000 {
		k.allow(fmt.Sprintf("k%d", i), now.Add(time.Duration(i)*10*time.Millisecond))
		peak = max(peak, k.size())
	}
	if peak > 2*6000+minKickPrune {
		t.Fatalf("limiter grew to %d keys", peak)
	}
}

// A count-trigger retry of a store the sweeps no longer seal (evicted: no writer) is dropped
// instead of kept for ever; the retries of stores still swept, and of other kinds, stay.
func TestSweepDropsRetriesOfStoresItNoLongerSeals(t *testing.T) {
	m := NewMetrics(nil)
	db, ro, ge := testDB(t, m)
	rs := &recStarter{}
	rs.setFail(errors.New("temporal unreachable"))
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start, Metrics: m, Resident: db.Resident})
	appendIDs(t, ge, "g1")
	appendIDs(t, ro, "r1")
	sw.FlushOnce(context.Background())
	retrying := func() map[string]bool {
		sw.triggers.mu.Lock()
		defer sw.triggers.mu.Unlock()
		return maps.Clone(sw.triggers.retry)
	}
	if got := retrying(); !got["generic:fast"] || !got["rollout:slow"] {
		t.Fatalf("retries after failed starts = %v", got)
	}
	sw.opts.Resident = func() []*store.Store { return []*store.Store{ro} } // generic:fast was evicted
	sw.FlushKind(context.Background(), store.KindGeneric)
	if got := retrying(); got["generic:fast"] || !got["rollout:slow"] {
		t.Fatalf("retries after generic:fast left = %v", got)
	}
}

func TestResidentKnobsReachTheStore(t *testing.T) {
	c := DefaultConfig()
	for flag, v := range map[string]string{"resident-stores-max": "7", "resident-idle": "90s"} {
		k, ok := lookupKnob(flag)
		if !ok {
			t.Fatalf("no knob %s", flag)
		}
		if err := k.set(&c, v); err != nil {
			t.Fatal(err)
		}
	}
	if o := c.StoreOptions(); o.ResidentStoresMax != 7 || o.ResidentIdle != 90*time.Second {
		t.Fatalf("store options = %d, %v", o.ResidentStoresMax, o.ResidentIdle)
	}
	c.ResidentStoresMax, c.ResidentIdle = -1, -time.Second
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--resident-stores-max") || !strings.Contains(err.Error(), "--resident-idle") {
		t.Fatalf("Validate = %v", err)
	}
}

// size is the number of keys remembered.
func (k *kickLimiter) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.last)
}
