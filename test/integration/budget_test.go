package integration

import (
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
)

// Concurrent merges on one worker never reserve more than its budget: a worker with a
// 1 MiB merge budget (and merge_max_bytes = budget, so every pass asks for all of it), eight
// stores with pending generations, eight MergeWal started at once. The budget's reserved
// bytes are sampled in-process and from /metrics the whole time: never above the limit, and
// every merge completes. While the test itself holds the whole budget, every merge slot's
// Prepare waits for it, and the MergeWal status query reports "waiting for budget".
func TestConcurrentMergesStayWithinBudget(t *testing.T) {
	e := newEnv(t)
	const budget = 1 << 20
	// Three generations of a store decode to about the whole budget, so passes also grow
	// their reservation and stop at a complete prefix when growth is refused.
	const nStores, gens, rowsPerGen = 8, 3, 1000

	cfg := e.config("budgeted")
	cfg.MergeBudgetBytes = budget
	cfg.MergeMaxBytes = budget
	cfg.MergeSlots = 4
	w := e.startWorker(cfg)
	b := w.DB().Options().Budget
	if b == nil || b.Limit() != budget {
		t.Fatalf("worker budget %v, want limit %d", b, budget)
	}

	var targets []string
	for i := range nStores {
		tg := fmt.Sprintf("generic:budget-%d", i)
		targets = append(targets, tg)
		e.writeGenerationsWith(e.createStore(w.DB(), tg), "k", gens, rowsPerGen, 100)
	}

	// Sample until the merges are done: the budget's own account, /metrics, and the process's
	// heap (runtime/metrics), which the budget does not compute.
	heapBefore := heapObjectBytes()
	var maxReserved, maxMetric, maxWaiting, samples, maxHeap atomic.Int64
	done := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(2)
	go func() {
		defer sampling.Done()
		for {
			r := b.Reserved()
			if r > maxReserved.Load() {
				maxReserved.Store(r)
			}
			if n := int64(b.Waiting()); n > maxWaiting.Load() {
				maxWaiting.Store(n)
			}
			if h := heapObjectBytes(); h > maxHeap.Load() {
				maxHeap.Store(h)
			}
			samples.Add(1)
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	go func() {
		defer sampling.Done()
		for {
			if v, err := scrapeMetric(w.HTTPAddr(), "walkeeper_merge_budget_reserved_bytes"); err == nil && int64(v) > maxMetric.Load() {
				maxMetric.Store(int64(v))
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Hold the whole budget, as one more merge of the process would, while every MergeWal
	// starts: each Prepare must queue for the budget instead of reserving past it.
	hold, _, err := b.Reserve(e.ctx(waitShort), budget)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]contract.MergeWalResult, nStores)
	errs := make([]error, nStores)
	runs := make(chan [2]string, nStores)
	for i, tg := range targets {
		tg := mustTarget(t, tg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := contract.StartMergeWal(e.ctx(waitShort), e.c, tg, contract.MergeWalInput{})
			if err == nil {
				runs <- [2]string{run.GetID(), run.GetRunID()}
				err = run.Get(e.ctx(waitLong), &results[i])
			}
			errs[i] = err
		}()
	}
	// Every merge slot of the shard queue ends up with a Prepare waiting for the budget, and
	// the status query says so.
	waitFor(t, waitLong, "every merge slot to wait for the budget", func() (bool, error) {
		return b.Waiting() >= cfg.MergeSlots, nil
	})
	var started [][2]string
	for range nStores {
		started = append(started, <-runs)
	}
	waitFor(t, waitLong, "a MergeWal status to report the budget wait", func() (bool, error) {
		for _, r := range started {
			v, err := e.c.QueryWorkflow(e.ctx(waitShort), r[0], r[1], contract.StatusQuery)
			if err != nil {
				return false, err
			}
			var st contract.MergeWalStatus
			if err := v.Get(&st); err != nil {
				return false, err
			}
			if strings.Contains(st.Blocked, contract.BlockedBudget) {
				t.Logf("%s status: phase %s, blocked %q", r[0], st.Phase, st.Blocked)
				return true, nil
			}
		}
		return false, nil
	})
	if r := b.Reserved(); r != budget {
		t.Fatalf("reserved %d while the test holds the whole budget of %d", r, budget)
	}
	hold.Release()
	wg.Wait()
	close(done)
	sampling.Wait()

	for i, tg := range targets {
		if errs[i] != nil {
			t.Errorf("%s: %v", tg, errs[i])
			continue
		}
		if results[i].Reclaimed != gens {
			t.Errorf("%s: result %+v, want %d generations reclaimed", tg, results[i], gens)
		}
		if st := e.stats(w.DB(), tg); st.TotalPending() != 0 || st.Rows != gens*rowsPerGen {
			t.Errorf("%s after merge: pending %d rows %d", tg, st.TotalPending(), st.Rows)
		}
	}
	passes := 0
	for _, r := range results {
		passes += r.Passes
	}
	t.Logf("budget %d: max reserved %d (in-process, %d samples), %d (/metrics); max waiting %d; %d passes for %d generations",
		budget, maxReserved.Load(), samples.Load(), maxMetric.Load(), maxWaiting.Load(), passes, nStores*gens)
	if m := maxReserved.Load(); m > budget {
		t.Errorf("reserved %d bytes at once, budget %d", m, budget)
	}
	if m := maxMetric.Load(); m > budget {
		t.Errorf("/metrics showed %d bytes reserved, budget %d", m, budget)
	}
	if maxMetric.Load() == 0 {
		t.Error("/metrics never showed a reservation")
	}
	if r := b.Reserved(); r != 0 {
		t.Errorf("%d bytes still reserved after every merge finished", r)
	}
	// The process, measured next to the budget's own account. The bound is loose on purpose:
	// a reservation is an account, not yet the allocation it stands for (the memory issue
	// makes merges allocate only what they reserved; then this bound can tighten towards the
	// budget). Today it catches a merge path that loads far more than its pass: the heap of
	// the whole test process (worker, SDK, HTTP, this test's own sampling) may grow by at
	// most 64 MiB over what it held before the merges, against a 1 MiB budget and ~2.4 MB of
	// rows in all eight stores.
	growth := maxHeap.Load() - heapBefore
	t.Logf("heap objects: %d MiB before the merges, peak %d MiB (+%d MiB)", heapBefore>>20, maxHeap.Load()>>20, growth>>20)
	if limit := int64(64 << 20); growth > limit {
		t.Errorf("process heap grew by %d MiB while merging with a %d KiB budget (limit %d MiB)", growth>>20, budget>>10, limit>>20)
	}
}

// heapObjectBytes reads the bytes of live and not yet swept heap objects of this process.
func heapObjectBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
