package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// memoryChild is the child half: open the store with the budget, run the requests at once,
// report VmHWM.
func memoryChild(ctx context.Context, o Options) error {
	var p memoryChildParams
	if err := childParams("memory", &p); err != nil {
		return err
	}
	runtime.GC()
	b := store.NewBudget(p.Budget)
	if p.Mode == "reads" {
		b = store.NewBudget(p.ReadBudget)
	}
	db, err := store.OpenDB(ctx, p.URL, storeOptions("memory-child", o.logger(), func(so *store.Options) {
		so.Budget = b
		so.MergeMaxBytes = p.Budget / 2
		so.MergeMaxGenerations = 0
		if p.Mode == "reads" {
			so.Budget = nil
			so.CacheBytes = 1 // cache off: every List decodes what it reads
			if p.ReadBudget > 0 {
				so.ReadBudget = b
			}
		}
	}))
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	var stores []*store.Store
	for _, n := range p.Stores {
		s, err := db.Open(ctx, store.Target{Kind: store.KindGeneric, Name: n})
		if err != nil {
			return err
		}
		stores = append(stores, s)
	}
	self := procRSS(os.Getpid())
	rssStart := self.rss()
	var maxReserved, maxAllocated, maxWaiting, maxHeapLive, maxHeap atomic.Int64
	profile := os.Getenv("WALKEEPER_BENCH_MEMPROFILE")
	if profile != "" {
		profile += fmt.Sprintf(".%s-b%d-rb%d-limit%s", p.Mode, p.Budget>>20, p.ReadBudget>>20, os.Getenv("GOMEMLIMIT"))
	}
	var profiledLive int64
	heap := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	stopSampling := poll(200*time.Microsecond, func() {
		raiseTo(&maxReserved, b.Reserved())
		raiseTo(&maxAllocated, b.Allocated())
		raiseTo(&maxWaiting, int64(b.Waiting()))
		metrics.Read(heap)
		if v := int64(heap[0].Value.Uint64()); v > maxHeapLive.Load() {
			if profile != "" && v > profiledLive+2<<20 {
				writeProfile(profile+".heap", "heap") // what is live near the peak
				profiledLive = v
			}
			maxHeapLive.Store(v)
		}
		raiseTo(&maxHeap, int64(heap[1].Value.Uint64()))
	})
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	done, busy := 0, 0
	for i := 0; i < p.Requests; i++ {
		s := stores[i%len(stores)]
		wg.Go(func() {
			if p.Mode == "reads" {
				// A refused read (budget_busy) is what a client retries after Retry-After.
				for attempt := 0; ; attempt++ {
					page, err := s.List(ctx, store.ListOptions{Limit: 100})
					mu.Lock()
					if errors.Is(err, store.ErrBudgetBusy) && attempt < 20 {
						busy++
						mu.Unlock()
						continue
					}
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if err == nil && len(page.Rows) > 0 {
						done++
					}
					mu.Unlock()
					return
				}
			}
			pm, err := s.Prepare(ctx, store.PrepareParams{Shard: p.Shard, AttemptKey: fmt.Sprintf("memory/%d", i)})
			if err == nil && pm != nil {
				_, err = s.Abort(ctx, pm)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if pm != nil {
				done++
			}
		})
	}
	wg.Wait()
	stopSampling()
	if firstErr != nil {
		return firstErr
	}
	if profile != "" {
		writeProfile(profile, "allocs")
	}
	out := memoryChildResult{
		VmHWM: self.peak(), VmRSSStart: rssStart, MaxReserved: maxReserved.Load(), MaxAllocated: maxAllocated.Load(),
		MaxHeapLive: maxHeapLive.Load(), MaxHeap: maxHeap.Load(),
		Prepared: done, Elapsed: time.Since(start).Seconds(), MaxWaiting: int(maxWaiting.Load()), Busy: busy,
	}
	return childPrint(out)
}

// writeProfile writes the runtime profile name to path (best effort: a diagnostic).
func writeProfile(path, name string) {
	if f, err := os.Create(path); err == nil {
		_ = pprof.Lookup(name).WriteTo(f, 0)
		_ = f.Close()
	}
}
