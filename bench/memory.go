package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// MemoryChildEnv carries the child's parameters (JSON) from RunMemory to the child process.
const MemoryChildEnv = "WALKEEPER_BENCH_MEMORY_CHILD"

type memoryChildParams struct {
	URL      string `json:"url"`
	Budget   int64  `json:"budget"`
	Requests int    `json:"requests"`
	Stores   []string
	Shard    string `json:"shard"`
}

type memoryChildResult struct {
	VmHWM       int64   `json:"vm_hwm"`
	VmRSSStart  int64   `json:"vm_rss_start"`
	MaxReserved int64   `json:"max_reserved"`
	Budget      int64   `json:"budget"`
	Prepared    int     `json:"prepared"`
	Bytes       int64   `json:"bytes"`
	Elapsed     float64 `json:"elapsed_s"`
	MaxWaiting  int     `json:"max_waiting"`
	GoMemLimit  string  `json:"gomemlimit"`
}

// RunMemory runs 12 concurrent merge requests, each sized half the process budget
// (merge_max_bytes = budget/2 over 12 stores holding at least that much), in a child process so
// that the peak RSS the OS reports (VmHWM in /proc/self/status) is the merges' own. Target:
// peak RSS ≤ budget + 64 MiB; reserved bytes never above the budget (sampled every 200 µs,
// and guaranteed by the semaphore). Each request prepares and then aborts (prepare is where the
// memory is; commit is metadata), so the data is reused by every repetition.
func RunMemory(ctx context.Context, o Options) (*Result, error) {
	if o.Child {
		return nil, memoryChild(ctx, o)
	}
	if o.Reexec == nil {
		return nil, errors.New("memory: no way to start the child process (Options.Reexec is nil)")
	}
	res := newResult("memory", o)
	budget := int64(128 << 20)
	if o.Quick {
		budget = 32 << 20
	}
	const requests = 12
	res.param("reps", o.reps())
	res.param("budget", fmt.Sprintf("%d MiB", budget>>20))
	res.param("requests", requests)
	res.param("request_size", fmt.Sprintf("%d MiB (merge_max_bytes = budget/2)", budget>>21))
	res.param("GOGC", "default (100)")
	dir, cleanup, err := o.workDir("memory")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	url := fileURL(dir, true)

	// Data: one store per request, 4 generations of budget/8 each (the 4th reaches budget/2).
	o.progressf("memory: writing %d stores × %d MiB of generations", requests, budget>>21)
	db, err := store.OpenDB(ctx, url, storeOptions("writer", o.logger()))
	if err != nil {
		return nil, err
	}
	const payload = 4 << 10
	rowsPerGen := int(budget/8) / payload
	var names []string
	for i := 0; i < requests; i++ {
		name := fmt.Sprintf("mem%02d", i)
		s, err := createGeneric(ctx, db, name)
		if err != nil {
			return nil, err
		}
		if err := writeGenerations(ctx, s, 4, rowsPerGen, payload, 1<<30, int64(i)<<32); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if err := db.Close(ctx); err != nil {
		return nil, err
	}

	type variant struct {
		name     string
		memLimit string
	}
	// A merge reserves its whole footprint (store.Prepare), so with the soft limit at the
	// budget the live heap stays under the limit and the collector keeps up without
	// thrashing; budget + 32 MiB is the variant measured before that change.
	variants := []variant{
		{"default GC", ""},
		{"GOMEMLIMIT = budget + 32 MiB", strconv.FormatInt(budget+32<<20, 10)},
		{"GOMEMLIMIT = budget", strconv.FormatInt(budget, 10)},
	}
	t := Table{Title: "Peak RSS of the child process (VmHWM), median over repetitions, range in brackets",
		Header: []string{"child", "peak RSS (MiB)", "RSS before merging (MiB)", "peak − before (MiB)", "budget + 64 MiB", "max reserved (MiB)", "max waiting", "prepared", "time (s)"}}
	for vi, v := range variants {
		var hwm, start, reserved, growth, elapsed []float64
		var maxRes int64
		var waiting, prepared int
		for rep := 0; rep < o.reps(); rep++ {
			raw, _ := json.Marshal(memoryChildParams{URL: url, Budget: budget, Requests: requests, Stores: names, Shard: store.ShardID("writer")})
			cmd := o.Reexec(ctx, "memory")
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, MemoryChildEnv+"="+string(raw))
			if v.memLimit != "" {
				cmd.Env = append(cmd.Env, "GOMEMLIMIT="+v.memLimit)
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("memory child: %v\n%s", err, lastLines(errb.String(), 20))
			}
			var cr memoryChildResult
			if err := json.Unmarshal(lastJSONLine(out.Bytes()), &cr); err != nil {
				return nil, fmt.Errorf("memory child output: %v\n%s\n%s", err, out.String(), lastLines(errb.String(), 20))
			}
			hwm = append(hwm, mib(cr.VmHWM))
			start = append(start, mib(cr.VmRSSStart))
			reserved = append(reserved, mib(cr.MaxReserved))
			growth = append(growth, mib(cr.VmHWM-cr.VmRSSStart))
			elapsed = append(elapsed, cr.Elapsed)
			maxRes = max(maxRes, cr.MaxReserved)
			waiting = max(waiting, cr.MaxWaiting)
			prepared = cr.Prepared
			o.progressf("memory: %s rep %d/%d: peak RSS %.0f MiB (budget %d MiB), max reserved %.0f MiB, %d prepared in %.1fs",
				v.name, rep+1, o.reps(), mib(cr.VmHWM), budget>>20, mib(cr.MaxReserved), cr.Prepared, cr.Elapsed)
		}
		h := spreadOf(hwm)
		t.Rows = append(t.Rows, []string{v.name, h.fmt("%.0f"), spreadOf(start).fmt("%.0f"), spreadOf(growth).fmt("%.0f"), fmt.Sprint((budget >> 20) + 64), spreadOf(reserved).fmt("%.0f"), fmt.Sprint(waiting), fmt.Sprint(prepared), spreadOf(elapsed).fmt("%.1f")})
		limit := mib(budget) + 64
		res.target(v.name+": peak RSS", fmt.Sprintf("≤ %.0f MiB", limit), h.fmt("%.0f")+" MiB", h.Max <= limit)
		res.target(v.name+": reserved never above budget", fmt.Sprintf("≤ %d MiB", budget>>20), fmt.Sprintf("%.0f MiB", mib(maxRes)), maxRes <= budget)
		key := []string{"default", "memlimit", "limitbudget"}[vi]
		res.Values[key+"_peak_mib_max"] = h.Max
		res.Values[key+"_peak_mib"] = h.Median
		res.Values[key+"_growth_mib"] = spreadOf(growth).Median
		res.Values[key+"_max_reserved"] = float64(maxRes)
		res.Values[key+"_prepared"] = float64(prepared)
	}
	res.Values["budget"] = float64(budget)
	res.Tables = append(res.Tables, t)
	return res, nil
}

// memoryChild is the child half: open the store with the budget, run the requests at once,
// report VmHWM.
func memoryChild(ctx context.Context, o Options) error {
	var p memoryChildParams
	if err := json.Unmarshal([]byte(os.Getenv(MemoryChildEnv)), &p); err != nil {
		return fmt.Errorf("memory child: bad %s: %w", MemoryChildEnv, err)
	}
	runtime.GC()
	b := store.NewBudget(p.Budget)
	db, err := store.OpenDB(ctx, p.URL, storeOptions("memory-child", o.logger(), func(so *store.Options) {
		so.Budget = b
		so.MergeMaxBytes = p.Budget / 2
		so.MergeMaxGenerations = 0
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
	rssStart := procStatus("VmRSS")
	var maxReserved atomic.Int64
	var maxWaiting atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(200 * time.Microsecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if r := b.Reserved(); r > maxReserved.Load() {
					maxReserved.Store(r)
				}
				if w := int64(b.Waiting()); w > maxWaiting.Load() {
					maxWaiting.Store(w)
				}
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	prepared := 0
	var bytesRead int64
	for i := 0; i < p.Requests; i++ {
		s := stores[i%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				prepared++
				bytesRead += pm.Bytes
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	if firstErr != nil {
		return firstErr
	}
	if path := os.Getenv("WALKEEPER_BENCH_MEMPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			_ = f.Close()
		}
	}
	out := memoryChildResult{
		VmHWM: procStatus("VmHWM"), VmRSSStart: rssStart, MaxReserved: maxReserved.Load(), Budget: p.Budget,
		Prepared: prepared, Bytes: bytesRead, Elapsed: time.Since(start).Seconds(), MaxWaiting: int(maxWaiting.Load()),
		GoMemLimit: os.Getenv("GOMEMLIMIT"),
	}
	raw, _ := json.Marshal(out)
	w := o.ChildOut
	if w == nil {
		w = os.Stdout
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
}

// procStatus reads a "kB" field of /proc/self/status in bytes (0 if unavailable).
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, field+":") {
			continue
		}
		fs := strings.Fields(strings.TrimPrefix(line, field+":"))
		if len(fs) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		return n << 10
	}
	return 0
}

func lastJSONLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(bytes.TrimSpace(lines[i]), []byte("{")) {
			return lines[i]
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

var _ = filepath.Join
