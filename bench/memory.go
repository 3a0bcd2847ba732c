package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store"
)

type memoryChildParams struct {
	Mode       string `json:"mode"` // "merge" (default) or "reads"
	URL        string `json:"url"`
	Budget     int64  `json:"budget"`
	Requests   int    `json:"requests"`
	Stores     []string
	Shard      string `json:"shard"`
	ReadBudget int64  `json:"read_budget"` // the read budget of the reads child (0 = none)
}

type memoryChildResult struct {
	VmHWM        int64 `json:"vm_hwm"`
	VmRSSStart   int64 `json:"vm_rss_start"`
	MaxReserved  int64 `json:"max_reserved"`
	MaxAllocated int64 `json:"max_allocated"`
	// MaxHeapLive and MaxHeap are the most the Go heap held live (/gc/heap/live:bytes) and in objects.
	MaxHeapLive int64   `json:"max_heap_live"`
	MaxHeap     int64   `json:"max_heap"`
	Prepared    int     `json:"prepared"`
	Elapsed     float64 `json:"elapsed_s"`
	MaxWaiting  int     `json:"max_waiting"`
	Busy        int     `json:"busy"`
}

// workerDefaultMemLimit is worker.Config.DerivedMemoryLimit at the default cache and read budget.
const workerDefaultMemLimit = 256<<20 + 256<<20 + 512<<20

func memoryBudgets(o Options) []int64 {
	if len(o.MemoryBudgets) > 0 {
		return o.MemoryBudgets
	}
	return fullOrQuick(o, []int64{32 << 20, 128 << 20, 1 << 30}, []int64{32 << 20})
}

// memoryGoal is a child's RSS growth bound (MiB): budget + 32 MiB, 25 % more with GOGC alone.
func memoryGoal(budget, memLimit int64) float64 {
	if memLimit == 0 {
		return 1.25*mib(budget) + 32
	}
	return mib(budget) + 32
}

// memoryPart reports whether the memory scenario runs part ("merges", "reads").
func memoryPart(o Options, part string) bool {
	return len(o.MemoryParts) == 0 || slices.Contains(o.MemoryParts, part)
}

// runMemory is the memory scenario (docs/benchmarks/memory.md): a child process's peak RSS growth
// under concurrent merges at each budget, and under concurrent Lists over 2,000 pending
// generations.
func runMemory(ctx context.Context, o Options, res *Result, dir string) error {
	const requests = 12
	budgets := memoryBudgets(o)
	var names []string
	for _, b := range budgets {
		names = append(names, fmt.Sprintf("%d MiB", b>>20))
	}
	res.params("budgets", strings.Join(names, ", "), "requests", requests, "request_size", "budget/2 (merge_max_bytes)")

	if memoryPart(o, "merges") {
		if err := runMemoryMerges(ctx, o, res, dir, budgets, requests); err != nil {
			return err
		}
	}
	if memoryPart(o, "reads") {
		return runMemoryReads(ctx, o, res, dir)
	}
	return nil
}

// runMemoryMerges runs requests prepares of budget/2 at each budget, in each child variant.
func runMemoryMerges(ctx context.Context, o Options, res *Result, dir string, budgets []int64, requests int) error {
	t := Table{Title: "Merges: peak RSS of the child process (VmHWM), median over repetitions, range in brackets",
		Header: []string{"budget", "child", "peak RSS (MiB)", "RSS before (MiB)", "growth (MiB)", "goal (MiB)", "max reserved (MiB)", "max allocated (MiB)", "max Go heap (MiB)", "max waiting", "prepared", "time (s)"}}
	for bi, budget := range budgets {
		url := fileURL(filepath.Join(dir, fmt.Sprintf("merge-%d", budget>>20)), true)
		o.progressf("memory: writing %d stores × %d MiB of generations", requests, budget>>21)
		stores, err := writeMemoryStores(ctx, o, url, requests, budget)
		if err != nil {
			return err
		}
		for _, v := range []struct {
			key, name string
			memLimit  int64 // GOMEMLIMIT; 0 = none
		}{
			{"default", "GOGC alone (default GC)", 0},
			{"workerdefaults", "worker defaults (GOMEMLIMIT = cache + read budget + 512 MiB)", workerDefaultMemLimit},
			{"limitbudget", "GOMEMLIMIT = budget", budget},
		} {
			runs, err := runMemoryChildren(ctx, o, memoryChildParams{URL: url, Budget: budget, Requests: requests, Stores: stores, Shard: store.ShardID("writer")}, v.memLimit)
			if err != nil {
				return err
			}
			g := spreadOf(runs.growth)
			goal := memoryGoal(budget, v.memLimit)
			t.Rows = append(t.Rows, []string{fmt.Sprintf("%d MiB", budget>>20), v.name, spreadOf(runs.hwm).fmt("%.0f"), spreadOf(runs.start).fmt("%.0f"), g.fmt("%.0f"),
				fmt.Sprintf("%.0f", goal), fmt.Sprintf("%.0f", mib(runs.maxReserved)), fmt.Sprintf("%.0f", mib(runs.maxAllocated)), fmt.Sprintf("%.0f", mib(runs.maxHeap)), fmt.Sprint(runs.maxWaiting), fmt.Sprint(runs.prepared), spreadOf(runs.elapsed).fmt("%.1f")})
			res.target(fmt.Sprintf("%d MiB, %s: peak RSS growth", budget>>20, v.key), fmt.Sprintf("≤ %.0f MiB", goal), g.fmt("%.0f")+" MiB", g.Max <= goal)
			res.target(fmt.Sprintf("%d MiB, %s: reserved never above budget", budget>>20, v.key), fmt.Sprintf("≤ %d MiB", budget>>20), fmt.Sprintf("%.0f MiB", mib(runs.maxReserved)), runs.maxReserved <= budget)
			prefix := fmt.Sprintf("b%d_%s", budget>>20, v.key)
			keys := []string{prefix}
			if bi == 0 {
				keys = append(keys, v.key) // the first budget's figures under the plain keys (tests)
			}
			for _, key := range keys {
				res.values(key+"_%s", map[string]float64{"peak_mib": spreadOf(runs.hwm).Median, "growth_mib": g.Median,
					"max_reserved": float64(runs.maxReserved), "prepared": float64(runs.prepared)})
			}
		}
		if bi == 0 {
			res.Values["budget"] = float64(budget)
		}
	}
	res.Tables = append(res.Tables, t)

	return nil
}

// runMemoryReads runs concurrent Lists over pending generations at a read budget of each
// merge budget.
func runMemoryReads(ctx context.Context, o Options, res *Result, dir string) error {
	const lists, gens = 16, 2000
	payload := 1 << 10
	rows := fullOrQuick(o, 64, 16) // ~64 KiB per generation, 128 MiB in all (quick: 16 KiB, 32 MiB)
	url := fileURL(filepath.Join(dir, "reads"), true)
	o.progressf("memory: writing %d generations of %d rows for the read test", gens, rows)
	if _, err := writeStore(ctx, o, url, "writer", "reads", gens, rows, payload, gens*rows/2, 0); err != nil {
		return err
	}
	rt := Table{Title: fmt.Sprintf("Reads: %d concurrent Lists (limit 100) over %d pending generations (%d MiB), cache off: peak RSS of the child (VmHWM)", lists, gens, int64(gens*rows*payload)>>20),
		Header: []string{"child", "peak RSS (MiB)", "RSS before (MiB)", "growth (MiB)", "goal (MiB)", "max read reserved (MiB)", "max read allocated (MiB)", "max Go heap (MiB)", "busy refusals", "time (s)"}}
	type readVariant struct {
		key, name string
		budget    int64
		memLimit  int64
	}
	var variants []readVariant
	for i, rb := range memoryBudgets(o) {
		key := fmt.Sprintf("reads_rb%d", rb>>20)
		if i == 0 {
			key = "reads" // the first budget's figures under the plain keys (tests)
		}
		variants = append(variants,
			readVariant{key, fmt.Sprintf("read budget %d MiB, worker defaults", rb>>20), rb, workerDefaultMemLimit},
			readVariant{key + "_gogc", fmt.Sprintf("read budget %d MiB, GOGC alone", rb>>20), rb, 0})
	}
	variants = append(variants, readVariant{"reads_nobudget", "no read budget (groups of 64 only), worker defaults", 0, workerDefaultMemLimit})
	for _, rv := range variants {
		runs, err := runMemoryChildren(ctx, o, memoryChildParams{Mode: "reads", URL: url, Requests: lists, Stores: []string{"reads"}, ReadBudget: rv.budget}, rv.memLimit)
		if err != nil {
			return err
		}
		g := spreadOf(runs.growth)
		goal := "—"
		if rv.budget > 0 {
			lim := memoryGoal(rv.budget, rv.memLimit)
			goal = fmt.Sprintf("%.0f", lim)
			res.target(rv.key+": peak RSS growth", fmt.Sprintf("≤ %.0f MiB", lim), g.fmt("%.0f")+" MiB", g.Max <= lim)
		}
		rt.Rows = append(rt.Rows, []string{rv.name, spreadOf(runs.hwm).fmt("%.0f"), spreadOf(runs.start).fmt("%.0f"), g.fmt("%.0f"), goal,
			fmt.Sprintf("%.0f", mib(runs.maxReserved)), fmt.Sprintf("%.0f", mib(runs.maxAllocated)), fmt.Sprintf("%.0f", mib(runs.maxHeap)), fmt.Sprint(runs.busy), spreadOf(runs.elapsed).fmt("%.1f")})
		res.values(rv.key+"_%s", map[string]float64{"growth_mib": g.Median, "lists": float64(runs.prepared), "max_reserved": float64(runs.maxReserved)})
	}
	res.Values["read_budget"] = float64(memoryBudgets(o)[0])
	res.Tables = append(res.Tables, rt)
	return nil
}

// writeMemoryStores writes a store per request: 4 generations of budget/8 (budget/2 in all).
func writeMemoryStores(ctx context.Context, o Options, url string, requests int, budget int64) ([]string, error) {
	const payload = 4 << 10
	rowsPerGen := int(budget/8) / payload
	var names []string
	for i := 0; i < requests; i++ {
		name := fmt.Sprintf("mem%02d", i)
		if _, err := writeStore(ctx, o, url, "writer", name, 4, rowsPerGen, payload, 1<<30, int64(i)<<32); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// memoryRuns are the repetitions of one child configuration.
type memoryRuns struct {
	hwm, start, growth, elapsed        []float64
	maxReserved, maxAllocated, maxHeap int64
	maxWaiting, prepared, busy         int
}

// runMemoryChildren runs the child o.reps() times with p (GOMEMLIMIT = memLimit if set).
func runMemoryChildren(ctx context.Context, o Options, p memoryChildParams, memLimit int64) (memoryRuns, error) {
	var r memoryRuns
	for rep := 0; rep < o.reps(); rep++ {
		var extra []string
		if memLimit > 0 {
			extra = append(extra, "GOMEMLIMIT="+strconv.FormatInt(memLimit, 10))
		}
		cmd, err := childCmd(ctx, o, "memory", p, extra...)
		if err != nil {
			return r, err
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return r, fmt.Errorf("memory child: %v\n%s", err, lastLines(errb.String(), 20))
		}
		var cr memoryChildResult
		if err := json.Unmarshal(lastJSONLine(out.Bytes()), &cr); err != nil {
			return r, fmt.Errorf("memory child output: %v\n%s\n%s", err, out.String(), lastLines(errb.String(), 20))
		}
		r.hwm = append(r.hwm, mib(cr.VmHWM))
		r.start = append(r.start, mib(cr.VmRSSStart))
		r.growth = append(r.growth, mib(cr.VmHWM-cr.VmRSSStart))
		r.elapsed = append(r.elapsed, cr.Elapsed)
		r.maxReserved = max(r.maxReserved, cr.MaxReserved)
		r.maxAllocated = max(r.maxAllocated, cr.MaxAllocated)
		r.maxHeap = max(r.maxHeap, cr.MaxHeap)
		r.maxWaiting = max(r.maxWaiting, cr.MaxWaiting)
		r.prepared = cr.Prepared
		r.busy += cr.Busy
		o.progressf("memory %s: rep %d/%d: peak RSS %.0f MiB (before %.0f), max reserved %.0f MiB, allocated %.0f MiB, heap live %.0f MiB, heap %.0f MiB, %d done in %.1fs",
			p.Mode, rep+1, o.reps(), mib(cr.VmHWM), mib(cr.VmRSSStart), mib(cr.MaxReserved), mib(cr.MaxAllocated), mib(cr.MaxHeapLive), mib(cr.MaxHeap), cr.Prepared, cr.Elapsed)
	}
	return r, nil
}

// memoryChild is the child half: the requests at once on a store under budget, then VmHWM.
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
		s, err := db.Open(ctx, genericTarget(n))
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
	var done, busy atomic.Int64
	var g errgroup.Group
	for i := range p.Requests {
		s := stores[i%len(stores)]
		g.Go(func() error {
			if p.Mode == "reads" {
				// A refused read (budget_busy) is what a client retries after Retry-After.
				for attempt := 0; ; attempt++ {
					page, err := s.List(ctx, store.ListOptions{Limit: 100})
					if errors.Is(err, store.ErrBudgetBusy) && attempt < 20 {
						busy.Add(1)
						continue
					}
					if err == nil && len(page.Rows) > 0 {
						done.Add(1)
					}
					return err
				}
			}
			pm, err := s.Prepare(ctx, store.PrepareParams{Shard: p.Shard, AttemptKey: fmt.Sprintf("memory/%d", i)})
			if pm != nil {
				done.Add(1)
				if err == nil {
					_, err = s.Abort(ctx, pm)
				}
			}
			return err
		})
	}
	err = g.Wait()
	stopSampling()
	if err != nil {
		return err
	}
	if profile != "" {
		writeProfile(profile, "allocs")
	}
	out := memoryChildResult{
		VmHWM: self.peak(), VmRSSStart: rssStart, MaxReserved: maxReserved.Load(), MaxAllocated: maxAllocated.Load(),
		MaxHeapLive: maxHeapLive.Load(), MaxHeap: maxHeap.Load(),
		Prepared: int(done.Load()), Elapsed: time.Since(start).Seconds(), MaxWaiting: int(maxWaiting.Load()), Busy: int(busy.Load()),
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
