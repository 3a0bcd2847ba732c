package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
)

// Every scenario runs in quick mode as a smoke test. Assertions are deliberately loose: they
// catch a broken invariant or a regression of about 2× against the numbers in
// docs/BENCHMARKS.md, never ordinary noise on a shared machine. `go test -short` skips the
// scenarios that start a Temporal dev server.

func quickOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		Quick:    true,
		OutDir:   t.TempDir(),
		WorkDir:  t.TempDir(),
		Progress: testWriter{t},
		Reexec: func(ctx context.Context, scenario string, args ...string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestChildProcess$", "-test.v=false"}, args...)...)
			cmd.Env = append(os.Environ(), "WALKEEPER_BENCH_CHILD="+scenario)
			return cmd
		},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChildProcess is the child half of scenarios measured in their own process (memory).
func TestChildProcess(t *testing.T) {
	scenario := os.Getenv("WALKEEPER_BENCH_CHILD")
	if scenario == "" {
		t.Skip("only runs as a child of a scenario")
	}
	if _, err := Run(context.Background(), scenario, Options{Child: true, ChildOut: os.Stdout}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func runQuick(t *testing.T, name string, tweak ...func(*Options)) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	o := quickOptions(t)
	for _, f := range tweak {
		f(&o)
	}
	res, err := Run(ctx, name, o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s took %s\n%s", name, time.Since(start).Round(time.Second), res.Markdown())
	return res
}

func needTemporal(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal dev server; skipped with -short")
	}
}

// TestIncidentQuick replays the incident with walkeeper's defaults (the count trigger asks
// MergeWal for parallel prepares, 64 generations per pass); WALKEEPER_BENCH_SERIAL=1 replays
// serial shard visits. Before MergeWal took shards in rounds, the serial schedule merged the
// shards it reached again and again while the others climbed to 44 (docs/BENCHMARKS.md,
// "Incident replay"); both now peak at 4–7 on a loaded 2-core machine. The bound stays at
// 3 × the count trigger, not the 2×: in one repetition of nine walkeeper's side
// stalled for the whole run and reached 34, and a stall must not fail the suite.
func TestIncidentQuick(t *testing.T) {
	needTemporal(t)
	res := runQuick(t, "incident")
	trig := res.Values["count_trigger"]
	// Normal: walkeeper peaks well below the count trigger; the bound is the 2× plus
	// slack for a loaded machine.
	if got, limit := res.Values["walkeeper_max"], 3*trig; got > limit {
		t.Errorf("walkeeper max pending per shard %.0f > %.0f (3 × count trigger %.0f)", got, limit, trig)
	}
	if b, w := res.Values["baseline_mean2_min"], res.Values["walkeeper_mean2_max"]; b <= w {
		t.Errorf("second half: baseline averages %.1f pending in its worst shard, walkeeper %.1f: the replay no longer separates them", b, w)
	}
	if len(res.Files) < 2 {
		t.Errorf("no CSV/PNG written: %v", res.Files)
	}
	for _, f := range res.Files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestCommitLockQuick(t *testing.T) {
	res := runQuick(t, "commit-lock")
	// A lock held across the merge's data I/O would take ~100 ms to seconds for 64 MiB. The
	// medians are ~0.3 ms (mem) and ~3–5 ms (file, one fsynced put); tails are disk noise, so
	// only medians are asserted.
	for _, sz := range []string{"64KiB", "1MiB", "64MiB"} {
		if got := res.Values["mem_"+sz+"_p50_us"]; got > 5000 {
			t.Errorf("mem %s: p50 lock hold %.0f µs > 5 ms", sz, got)
		}
		if got := res.Values["file_"+sz+"_p50_us"]; got > 100000 {
			t.Errorf("file %s: p50 lock hold %.0f µs > 100 ms", sz, got)
		}
	}
	if r := res.Values["mem_ratio_p50"]; r > 5 {
		t.Errorf("mem: 64 MiB / 64 KiB p50 lock hold = %.1f: the lock grows with merge size", r)
	}
}

func TestAppendLatencyQuick(t *testing.T) {
	res := runQuick(t, "append-latency")
	// Under -race the merging child (a race-built re-exec of this binary) can spend the
	// whole short busy phase starting up, so only a normal build must have merged.
	if (res.Values["merged"] == 0 || res.Values["merged_nosync"] == 0) && !raceEnabled {
		t.Errorf("no generation merged during the busy phases: %v", res.Values)
	}
	// Without fsync the disk queue is out of the picture: appends never take the merge lock,
	// so merges may cost CPU but must not multiply append latency. (With fsync the shared
	// disk dominates; no assertion.)
	if r := res.Values["ratio_p50_nosync"]; r > 3 {
		t.Errorf("append p50 with merges / idle, no fsync = %.2f > 3", r)
	}
}

func TestMergeThroughputQuick(t *testing.T) {
	res := runQuick(t, "merge-throughput")
	// After the issue-4 fixes the full run measures 1.14 (4 KiB rows) and 0.67 (200 B rows),
	// quick runs ~1.3 and ~0.5, with 2–3× spread between repetitions on a loaded 2-vCPU
	// machine; the bounds catch a 2× regression (the state before: 0.45 and 0.32).
	if r := res.Values["ratio"]; r < 0.4 {
		t.Errorf("merge throughput / raw I/O, 4 KiB rows = %.2f < 0.4", r)
	}
	if r := res.Values["ratio_small"]; r < 0.2 {
		t.Errorf("merge throughput / raw I/O, 200 B rows = %.2f < 0.2", r)
	}
}

func TestMemoryQuick(t *testing.T) {
	res := runQuick(t, "memory")
	budget := res.Values["budget"]
	for _, k := range []string{"default", "memlimit", "limitbudget"} {
		if got := res.Values[k+"_max_reserved"]; got > budget {
			t.Errorf("%s: reserved %.0f bytes > budget %.0f", k, got, budget)
		}
		if res.Values[k+"_prepared"] != 12 {
			t.Errorf("%s: %v of 12 merges prepared", k, res.Values[k+"_prepared"])
		}
		// Peak RSS above the child's RSS before merging (the binary and runtime, ~56 MiB,
		// are not the merges'). Quick runs after the issue-4 fixes grow by 85–113 MiB with
		// the default GC, ~60 MiB with GOMEMLIMIT = budget + 32 MiB and ~52 MiB at the budget
		// (before them: ~250 and ~150); the bounds catch a 2× regression.
		limit := map[string]float64{"default": 230, "memlimit": 130, "limitbudget": 120}[k]
		if got := res.Values[k+"_growth_mib"]; got > limit && !raceEnabled {
			t.Errorf("%s: peak RSS grew by %.0f MiB while merging > %.0f MiB", k, got, limit)
		}
	}
}

func TestParallelPrepareQuick(t *testing.T) {
	res := runQuick(t, "parallel-prepare")
	// With a per-request latency, prepares are latency-bound and must overlap. (On a local
	// disk they are CPU-bound: no assertion, a loaded 2-vCPU machine has no spare core.)
	if r := res.Values["ratio_latency"]; r < 1.1 {
		t.Errorf("parallel prepare under 10 ms/request latency: serial/parallel = %.2f < 1.1", r)
	}
	// A prepare reads its generations concurrently: ~14 sequential round trips for a quick
	// prepare of 4 generations (metadata, list, the reads as one, the staged write). Reading
	// them one after another again, or another few round trips per prepare, trips this.
	// The count is derived from time (prepare time / modelled latency), so it only means
	// round trips when CPU time is small against 10 ms: not under -race.
	if n := res.Values["roundtrips_per_prepare"]; n > 28 && !raceEnabled {
		t.Errorf("serial prepare under 10 ms/request latency took %.1f round trips per prepare > 28", n)
	}
}

func TestTemporalOverheadQuick(t *testing.T) {
	needTemporal(t)
	res := runQuick(t, "temporal-overhead")
	if res.Values["wf_rate"] <= 0 || res.Values["direct_rate"] <= 0 {
		t.Fatalf("no merges measured: %v", res.Values)
	}
	if res.Values["sweep_s"] > 60 {
		t.Errorf("sweep over idle stores took %.1fs", res.Values["sweep_s"])
	}
}

func TestReadAmpQuick(t *testing.T) {
	res := runQuick(t, "read-amp")
	if res.Values["amp_top"] <= 1 {
		t.Logf("note: no read amplification measured at the top level (%.2f×)", res.Values["amp_top"])
	}
	if top, after := res.Values["amp_top"], res.Values["amp_after_merge"]; after >= top {
		t.Errorf("merging did not help: List p50 %.1f× the empty store's after merging, %.1f× before", after, top)
	}
}

func TestSummaryHelpers(t *testing.T) {
	s := spreadOf([]float64{3, 1, 2})
	if s.Median != 2 || s.Min != 1 || s.Max != 3 {
		t.Fatalf("spreadOf: %+v", s)
	}
	d := summarize([]time.Duration{5, 1, 4, 2, 3})
	if d.P50 != 3 || d.Max != 5 || d.Min != 1 {
		t.Fatalf("summarize: %+v", d)
	}
	if _, ok := Lookup("incident"); !ok {
		t.Fatal("incident not registered")
	}
	if _, err := Run(context.Background(), "nope", Options{}); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}

// TestFleetQuick runs the fleet scenario at 2,000 and 20,000 stores. The design before the
// demand index reads every store (≥ 4 requests per store) and, at 20,000 stores in one kind,
// its ScanStats result passes the server's blob limit: the run must record that as a failed
// sweep, not crash. The demand side, where this build has it, must finish at every size
// within the request bound.
func TestFleetQuick(t *testing.T) {
	needTemporal(t)
	res := runQuick(t, "fleet")
	need := func(key string) float64 {
		t.Helper()
		v, ok := res.Values[key]
		if !ok {
			t.Fatalf("value %q missing (have %v)", key, res.Values)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("value %q = %v", key, v)
		}
		return v
	}
	for _, key := range []string{"scan_2000_", "scan_20000_", "scan_20000_fixed_"} {
		need(key + "failed")
		for _, k := range []string{"sweep_s", "requests", "largest_event_bytes", "history_events", "rss_growth_mib", "debt"} {
			need(key + k)
		}
	}
	if need("scan_2000_failed") == 0 {
		if got := need("scan_2000_requests"); got < 4*2000 {
			t.Errorf("full scan of 2000 stores made %.0f storage requests, want ≥ 4 per store", got)
		}
		if need("scan_2000_started") != need("scan_2000_debt") {
			t.Errorf("full scan at 2000 stores started %.0f of %.0f indebted stores", res.Values["scan_2000_started"], res.Values["scan_2000_debt"])
		}
	}
	if _, err := sweepInputFor(designDemand, contract.MaintenanceSweepInput{}); err != nil {
		t.Logf("demand side not in this build: %v", err)
		return
	}
	for _, key := range []string{"demand_2000_", "demand_20000_", "demand_20000_fixed_"} {
		if need(key+"failed") != 0 {
			t.Errorf("%s: the demand-driven sweep failed", key)
			continue
		}
		debt := need(key + "debt")
		if got := need(key + "requests"); got > 2*debt+100 {
			t.Errorf("%s: %.0f storage requests > 2 × %.0f in debt + 100", key, got, debt)
		}
		if got := need(key + "started"); got != debt {
			t.Errorf("%s: %.0f of %.0f indebted stores had their MergeWal started", key, got, debt)
		}
		if got := need(key + "largest_event_bytes"); got > 256<<10 {
			t.Errorf("%s: largest sweep history event %.0f B > 256 KiB", key, got)
		}
		need(key + "ttm_s")
	}
}

// TestFleetReport: the report of a run where the scan fails at the larger size keeps the
// failure as a value and an unmet target, and still plots both designs.
func TestFleetReport(t *testing.T) {
	o := Options{OutDir: t.TempDir()}
	res := newResult("fleet", o)
	samples := []fleetSample{
		{Stores: 100, Debt: 1, Design: designScan, Duration: time.Second, Requests: 504, Events: 30, Started: 1, TTM: time.Second},
		{Stores: 100, Debt: 1, Design: designDemand, Duration: time.Second, Requests: 3, Events: 30, Started: 1, TTM: time.Second},
		{Stores: 1000, Debt: 10, Design: designScan, Duration: 2 * time.Second, Requests: 5040, Failed: "failed: too big", LargestPayload: 5 << 20},
		{Stores: 1000, Debt: 10, Design: designDemand, Duration: time.Second, Requests: 3, Events: 40, Started: 10, TTM: 2 * time.Second},
		{Stores: 1000, Debt: 1, FixedDebt: true, Design: designScan, Duration: 2 * time.Second, Requests: 5004, Failed: "failed: too big"},
		{Stores: 1000, Debt: 1, FixedDebt: true, Design: designDemand, Duration: time.Second, Requests: 3, Events: 30, Started: 1, TTM: time.Second},
	}
	fleetReport(res, o, []int{100, 1000}, samples)
	if res.Values["scan_1000_failed"] != 1 || res.Values["demand_1000_failed"] != 0 {
		t.Fatalf("failed values: %v", res.Values)
	}
	if r, ok := res.Values["demand_requests_ratio"]; !ok || r != 1 {
		t.Fatalf("demand requests ratio %v (present %v)", r, ok)
	}
	for _, tg := range res.Targets {
		if strings.HasPrefix(tg.Name, "scan: every sweep") && tg.Met {
			t.Errorf("target %q met with a failed sweep", tg.Name)
		}
		if strings.HasPrefix(tg.Name, "demand: requests per sweep") && !tg.Met {
			t.Errorf("target %q not met: %s", tg.Name, tg.Measured)
		}
	}
	if len(res.Files) != 5 {
		t.Fatalf("files %v, want 4 plots and a CSV", res.Files)
	}
	for _, f := range res.Files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
