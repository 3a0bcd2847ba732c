package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
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
		Reexec: func(ctx context.Context, scenario string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildProcess$", "-test.v=false")
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
	if _, err := Run(context.Background(), scenario, Options{Child: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// quickDeadlines are the scenarios whose fixed amount of work can outlast the default deadline
// on a loaded machine: fairness starts two dev servers and drains 230 merges through each,
// which took 205 s in a CI run where the busy lanes held them to 1.9–3.9 merges/s.
var quickDeadlines = map[string]time.Duration{"fairness": 12 * time.Minute}

func runQuick(t *testing.T, name string, tweak ...func(*Options)) *Result {
	t.Helper()
	// A deadline, not a bound: the memory scenario writes 2,000 generations, which takes
	// ~4 minutes on a race-built binary (a timing bound, so it relaxes under -race).
	deadline := 4 * time.Minute
	if d, ok := quickDeadlines[name]; ok {
		deadline = d
	}
	if raceEnabled {
		deadline = 12 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
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

// TestIncidentQuick replays the incident with walkeeper's defaults (the count trigger asks
// MergeWal for parallel prepares, 64 generations per pass); WALKEEPER_BENCH_SERIAL=1 replays
// serial shard visits. Before MergeWal took shards in rounds, the serial schedule merged the
// shards it reached again and again while the others climbed to 44
// (docs/benchmarks/incident.md); both now peak at 4–7 on a loaded 2-core machine. The bound is
// 3 × the count trigger, not the target's 2×: in one repetition of nine walkeeper's side
// stalled for the whole run and reached 34, within 6 of 2 × the quick trigger of 20, and a
// stall must not fail the suite.
func TestIncidentQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "incident")
	trig := value(t, res, "count_trigger")
	// Normal: walkeeper peaks well below the count trigger; the bound is the target's 2× plus
	// slack for a loaded machine.
	if got, limit := value(t, res, "walkeeper_max"), 3*trig; got > limit {
		t.Errorf("walkeeper max pending per shard %.0f > %.0f (3 × count trigger %.0f)", got, limit, trig)
	}
	if b, w := value(t, res, "baseline_mean2_min"), value(t, res, "walkeeper_mean2_max"); b <= w {
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

// maxLockShare bounds the commit lock's p50 hold as a share of the p50 Commit call measured
// in the same run (TestCommitLockQuick). The lock covers only the in-memory swap of the
// cached base (publishBaseThenSwap): a quick run measures a hold of 0.1–0.4 µs in a
// 120–500 µs Commit on mem:// (share ≤ 0.003) and of under 1 µs in a Commit of milliseconds
// on file:// (share ≤ 0.0002). With the manifest read and the encoding moved back under the
// lock (scripts/mutations/commit-lock-covers-manifest-read.patch) the mem:// share measured
// 0.06–0.28; with the manifest write and fsync moved there
// (commit-lock-covers-manifest-write.patch) mem:// does not show it (its write is a map
// insert), but the file:// hold is the fsync, a share of 0.12–0.14 at 64 KiB and 1 MiB.
// 0.02 is 7× today's worst share and 3× under the mutations' least.
const maxLockShare = 0.02

func TestCommitLockQuick(t *testing.T) {
	res := runQuick(t, "commit-lock")
	// The claim (docs/benchmarks/commit-lock.md): the lock covers only the in-memory swap of
	// the cached latest base, so it is a tiny part of the Commit call measured in the same
	// run (the manifest read, the checks, the encoding, the conditional write of base version
	// v+1, the drain of the shard manifest and the clean-up are outside it). Each backend
	// catches a different regression: mem:// work done in memory under the lock, file:// a
	// storage request under it. The share is a ratio measured in one run, so it stays on
	// under -race.
	for _, be := range []string{"mem", "file"} {
		for _, sz := range []string{"64KiB", "1MiB", "64MiB"} {
			hold, commit := value(t, res, be+"_"+sz+"_p50_us"), value(t, res, be+"_"+sz+"_commit_p50_us")
			t.Logf("%s %s: p50 lock hold %.1f µs, p50 Commit %.0f µs (share %.4f)", be, sz, hold, commit, hold/commit)
			if share := hold / commit; share > maxLockShare {
				t.Errorf("%s %s: p50 lock hold %.0f µs is %.0f%% of the p50 Commit (%.0f µs) > %.0f%%: the lock covers more than the swap",
					be, sz, hold, 100*share, commit, 100*maxLockShare)
			}
			// Absolute medians only catch gross regressions (timing, relaxed under -race):
			// the docs report holds of a few µs on either backend.
			if hold > 1000*raceSlowdown {
				t.Errorf("%s %s: p50 lock hold %.0f µs > %.0f µs", be, sz, hold, 1000*raceSlowdown)
			}
		}
	}
	// The hold must not grow with the merge: docs report a 64 MiB / 64 KiB p50 ratio of 0.52.
	if r := value(t, res, "mem_ratio_p50"); r > 3 {
		t.Errorf("mem: 64 MiB / 64 KiB p50 lock hold = %.1f: the lock grows with merge size", r)
	}
}

func TestAppendLatencyQuick(t *testing.T) {
	res := runQuick(t, "append-latency")
	// The ratio below only means something if merges ran during the busy phases: the merger
	// is in this process and starts each busy phase with a 40-generation backlog, so it
	// merges under -race too.
	for _, k := range []string{"merged", "merged_nosync"} {
		if value(t, res, k) == 0 {
			t.Errorf("%s: no generation merged during the busy phases: %v", k, res.Values)
		}
	}
	// The ratios are reported, not asserted: on a shared machine under -race a busy phase can
	// be starved of CPU and its latency multiplied by the load, not by walkeeper. That appends
	// never wait on a merge is checked without timing, by store's
	// TestAppendsNeverWaitOnAStalledMerge. A busy phase without appends is NaN and fails in
	// value.
	value(t, res, "ratio_p50")
	value(t, res, "ratio_p50_nosync")
}

func TestMergeThroughputQuick(t *testing.T) {
	// A quick repetition takes 1–3 s, fsyncing on a shared disk: at load 25–40 single
	// repetitions ranged 0.11–2.45 (4 KiB rows) for the same binary, and under a load of five
	// concurrent builds the median of 5 fell to 0.39 and 0.21 on builds that meet the target.
	// A stall slows some repetitions, a slower merge slows every one, so the check takes the
	// best of 5.
	res := runQuick(t, "merge-throughput", func(o *Options) { o.Reps = 5 })
	// The full run measures 1.14 (4 KiB rows) and 0.67 (200 B rows), quick runs ~1.3 and
	// ~0.5 (docs/benchmarks/merge-throughput.md); the bounds catch a merge about three times
	// slower than the quick figures.
	if r := value(t, res, "ratio_best"); r < 0.4 {
		t.Errorf("merge throughput / raw I/O, 4 KiB rows, best of 5 = %.2f < 0.4", r)
	}
	if r := value(t, res, "ratio_best_small"); r < 0.2 {
		t.Errorf("merge throughput / raw I/O, 200 B rows, best of 5 = %.2f < 0.2", r)
	}
}

func TestMemoryQuick(t *testing.T) {
	res := runQuick(t, "memory")
	budget := value(t, res, "budget")
	for _, k := range []string{"default", "workerdefaults", "limitbudget"} {
		if got := value(t, res, k+"_max_reserved"); got > budget || got <= 0 {
			t.Errorf("%s: max reserved %.0f bytes, want in (0, budget %.0f]", k, got, budget)
		}
		if got := value(t, res, k+"_prepared"); got != 12 {
			t.Errorf("%s: %v of 12 merges prepared", k, got)
		}
		// Peak RSS above the child's RSS before merging (the binary and runtime, ~60 MiB,
		// are not the merges'). Quick runs with the budget-charged allocator grow
		// by ~63 MiB with GOGC alone, ~61 MiB with the worker's default soft limit and ~51 MiB
		// with the limit at the budget (before it: 94, 60 and 53); the bounds catch a 2×
		// regression. The child is a race-built copy of this binary under -race, and the race
		// detector multiplies memory use (race_on_test.go), so the bound is scaled there, not
		// dropped.
		limit := map[string]float64{"default": 150, "workerdefaults": 150, "limitbudget": 120}[k] * raceMemFactor
		if got := value(t, res, k+"_growth_mib"); got > limit {
			t.Errorf("%s: peak RSS grew by %.0f MiB while merging > %.0f MiB", k, got, limit)
		}
	}
	if got := value(t, res, "reads_lists"); got != 16 {
		t.Errorf("reads: %v of 16 Lists returned rows", got)
	}
	if got, rb := value(t, res, "reads_max_reserved"), value(t, res, "read_budget"); got > rb || got <= 0 {
		t.Errorf("reads: max reserved %.0f bytes, want in (0, read budget %.0f]", got, rb)
	}
	// 16 Lists over 2,000 generations with the cache off; the read budget is 32 MiB.
	// The goal is read budget + 32 MiB = 64 MiB; today 16 Lists grow by ~104 MiB
	// (docs/benchmarks/memory.md), so this bound catches a 2× regression of today's state, not
	// the goal.
	if got, limit := value(t, res, "reads_growth_mib"), 3*32.0+64; got > limit*raceMemFactor {
		t.Errorf("reads: peak RSS grew by %.0f MiB > %.0f MiB", got, limit*raceMemFactor)
	}
}

func TestParallelPrepareQuick(t *testing.T) {
	res := runQuick(t, "parallel-prepare")
	// With a per-request latency, prepares are latency-bound and must overlap: the parallel
	// prepares have more requests in flight at once than one prepare alone. Counted, not timed:
	// their time ratio (serial/parallel, once bounded at 1.1) fell to 0.86–0.96 when a loaded
	// machine made the prepares CPU-bound, with or without -race. (On a local disk they are
	// CPU-bound anyway: no bound.)
	value(t, res, "ratio")
	value(t, res, "ratio_latency")
	serial, parallel := value(t, res, "max_in_flight_serial"), value(t, res, "max_in_flight_parallel")
	if parallel <= serial {
		t.Errorf("parallel prepares under 10 ms/request latency had at most %.0f requests in flight at once, one prepare alone %.0f: they did not overlap", parallel, serial)
	}
	// A prepare reads its generations concurrently: ~14 sequential round trips for a quick
	// prepare of 4 generations (metadata, list, the reads as one, the staged write). Reading
	// them one after another again, or another few round trips per prepare, trips this.
	// The count is derived from time (prepare time / modelled latency), so it is a timing
	// bound: it only means round trips when CPU time is small against 10 ms, and under -race
	// CPU time is not small.
	n := value(t, res, "roundtrips_per_prepare")
	if n > 28 && !raceEnabled {
		t.Errorf("serial prepare under 10 ms/request latency took %.1f round trips per prepare > 28", n)
	}
}

func TestTemporalOverheadQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "temporal-overhead")
	wf, direct := value(t, res, "wf_rate"), value(t, res, "direct_rate")
	if wf <= 0 || direct <= 0 {
		t.Fatalf("no merges measured: %v", res.Values)
	}
	// docs/benchmarks/temporal-overhead.md: a one-generation MergeWal costs 65 ms of
	// orchestration over the same prepare + commit called directly (target ≤ 100 ms), and
	// the bare workflow of 4 sequential no-op activities 77 ms, on the tuned server. Both are
	// a start, 4 activities and 5 workflow tasks on the same server, so their ratio holds on
	// a loaded machine: 0.85 in that full run, 2.1 and 2.0 in quick runs at load 12 and 30,
	// 1.1 at load 6. The bound catches what the bare workflow cannot absorb: a 500 ms timer
	// per pass (scripts/mutations/merge-wal-timer-per-pass.patch) measured 16.6–21.3. It does not
	// catch the actions of the older workflow (a watchdog timer per activity, an upsert
	// per pass: merge-wal-actions-before-run-3.patch, ratio 2.19 against 1.10 the run
	// before): a bound tight enough for that would flake on this machine, and
	// test/integration TestMergeWalActionsPerPass counts those from real histories instead.
	// The ratio is a timing bound too (the workflows' own code runs slower under -race), so
	// it relaxes there.
	wfP50, dP50 := value(t, res, "wf_p50_ms"), value(t, res, "direct_p50_ms")
	bare := value(t, res, "bare4_p50_ms_tuned")
	over := wfP50 - dP50
	limit := 4.0
	if raceEnabled {
		limit = 8
	}
	t.Logf("orchestration %.0f ms over the direct loop (p50 %.0f vs %.0f ms), bare 4-activity workflow %.0f ms: ratio %.2f", over, wfP50, dP50, bare, over/bare)
	if over > limit*bare {
		t.Errorf("MergeWal adds %.0f ms per 1 MiB merge over the direct loop (p50 %.0f vs %.0f ms), %.1f× the bare 4-activity workflow's %.0f ms in the same run > %.0f×",
			over, wfP50, dP50, over/bare, bare, limit)
	}
	// And a gross bound for a regression that slows both alike (timing, relaxed under -race).
	if over > 1000*raceSlowdown {
		t.Errorf("MergeWal adds %.0f ms per 1 MiB merge over the direct loop > %.0f ms", over, 1000*raceSlowdown)
	}
	// The sweep over idle stores: 0.20 s for 1,000 stores in the recorded run, against 151 ms
	// for a one-generation MergeWal (1.3×). Both are a workflow and a few activities on the
	// same server, and each sweep is timed right after such a merge, so their ratio holds on a
	// loaded machine: the quick run's 100 stores sweep in 0.54–0.83× the merge before them on an
	// idle machine. The median over five pairs above 2 is a sweep about 3× slower (serial scans,
	// a scan per store in the workflow, ...): 200 ms more per kind's scan made it 3.3× and
	// failed, 100 ms (a sweep 2.5× slower) 1.7× and passed. A busy moment slows a pair or two,
	// not the median.
	if r := value(t, res, "sweep_vs_merge"); r > 2 {
		t.Errorf("a sweep over idle stores took %.2f× the one-generation MergeWal just before it (median of the pairs) > 2×", r)
	}
}

func TestReadAmpQuick(t *testing.T) {
	res := runQuick(t, "read-amp")
	// The scenario's point, that reads over many pending generations cost more, is checked
	// side by side below (list_speedup_merged). amp_top, the top level against the empty
	// store timed half a minute earlier, is reported but not bounded: on a loaded CI machine
	// the empty store's List p50 once came out slower than at 16 pending, and the ratio 1.99×
	// while the side-by-side one was 9.4×.
	value(t, res, "amp_top")
	// The last rows measure a fully merged store: a merge that left generations pending
	// (scripts/mutations/merge-all-one-pass.patch: 192 of 256) was timed as "after merging"
	// and passed the timing bound below, the old one and the new, on a loaded machine (15.7×
	// against 91.4× before).
	if left := value(t, res, "pending_after_merge"); left != 0 {
		t.Errorf("merging left %.0f generations pending: the rows after merging do not measure a merged store", left)
	}
	// After merging everything and compacting the base, a List costs at most two thirds of
	// what it did over 256 pending generations. Timed side by side, Lists alternating between
	// a copy of the unmerged store and the merged one: two levels timed a few seconds apart
	// failed on a loaded machine because the load changed between them. The quick store's
	// small generations separate them by 2.6–3.8× (the full scenario's by 6.7×,
	// docs/benchmarks/read-amp.md), so the bound is 1.5×, which a merge that does not help
	// (about 1×) still fails.
	if speedup := value(t, res, "list_speedup_merged"); speedup < 1.5 {
		t.Errorf("merging did not help: a List over 256 pending generations took %.1f× the merged store's, side by side (want at least 1.5×)", speedup)
	}
}

func TestSummaryHelpers(t *testing.T) {
	s := spreadOf([]float64{3, 1, 2})
	if s.Median != 2 || s.Min != 1 || s.Max != 3 {
		t.Fatalf("spreadOf: %+v", s)
	}
	if s := spreadBy([]time.Duration{3, 1, 2}, func(d time.Duration) float64 { return float64(d) }); s != (spread{Median: 2, Min: 1, Max: 3, N: 3}) {
		t.Fatalf("spreadBy: %+v", s)
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

// TestFleetQuick runs the fleet scenario at 2,000 and 20,000 stores: the demand-driven sweep
// must finish at every size within the request bound.
func TestFleetQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "fleet")
	need := func(key string) float64 { t.Helper(); return value(t, res, key) }
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
		if got, bound := need(key+"history_events"), contract.SweepHistoryBound(3, contract.DefaultSweepMaxStarts, contract.DefaultSweepStartBatch); got > float64(bound) {
			t.Errorf("%s: the sweep's history has %.0f events, over its bound %d (contract.SweepHistoryBound)", key, got, bound)
		}
		need(key + "ttm_s")
	}
	// What discovery allocates bounds a worker's memory for it: at the same debt it must not
	// follow the fleet (10× the stores). Loose: idle workers' polling allocates too.
	if lo, hi := need("demand_2000_discovery_alloc_mib"), need("demand_20000_fixed_discovery_alloc_mib"); hi > 2*lo+16 {
		t.Errorf("demand discovery allocated %.1f MiB at 20000 stores against %.1f at 2000, same debt", hi, lo)
	}
}

// TestFleetReport: variants are reported side by side, a table and values each; the report
// of a run where a variant's sweep fails at the larger size keeps the failure as a value and
// an unmet target, and still plots every side.
func TestFleetReport(t *testing.T) {
	o := Options{OutDir: t.TempDir()}
	res := newResult("fleet", o)
	slow := fleetVariant{Concurrency: 16, Batch: 16}
	samples := []fleetSample{
		{Stores: 100, Debt: 1, Variant: slow, Duration: time.Second, Requests: 504, sweepHistory: sweepHistory{events: 30}, Started: 1, TTM: time.Second},
		{Stores: 100, Debt: 1, Duration: time.Second, Requests: 3, sweepHistory: sweepHistory{events: 30}, Started: 1, TTM: time.Second},
		{Stores: 1000, Debt: 10, Variant: slow, Duration: 2 * time.Second, Requests: 5040, Failed: "failed: too big", LargestPayload: 5 << 20},
		{Stores: 1000, Debt: 10, Duration: time.Second, Requests: 3, sweepHistory: sweepHistory{events: 40}, Started: 10, TTM: 2 * time.Second},
		{Stores: 1000, Debt: 1, FixedDebt: true, Variant: slow, Duration: 2 * time.Second, Requests: 5004, Failed: "failed: too big"},
		{Stores: 1000, Debt: 1, FixedDebt: true, Duration: time.Second, Requests: 3, sweepHistory: sweepHistory{events: 30}, Started: 1, TTM: time.Second},
	}
	fleetReport(res, o, []int{100, 1000}, samples)
	if len(res.Tables) != 2 || !strings.Contains(res.Tables[0].Title, `"demand 16/16"`) || !strings.Contains(res.Tables[1].Title, `"demand"`) {
		t.Fatalf("tables %d: %v", len(res.Tables), res.Tables)
	}
	for _, key := range []string{"demand_16_16_100_requests", "demand_1000_fixed_requests", "demand_requests_ratio"} {
		if _, ok := res.Values[key]; !ok {
			t.Errorf("value %s missing", key)
		}
	}
	slowKey := slow.valueName()
	if res.Values[slowKey+"_1000_failed"] != 1 || res.Values["demand_1000_failed"] != 0 {
		t.Fatalf("failed values: %v", res.Values)
	}
	if r, ok := res.Values["demand_requests_ratio"]; !ok || r != 1 {
		t.Fatalf("demand requests ratio %v (present %v)", r, ok)
	}
	for _, tg := range res.Targets {
		if strings.HasPrefix(tg.Name, slow.name()+": every sweep") && tg.Met {
			t.Errorf("target %q met with a failed sweep", tg.Name)
		}
		if strings.HasPrefix(tg.Name, "demand: requests per sweep") && !tg.Met {
			t.Errorf("target %q not met: %s", tg.Name, tg.Measured)
		}
	}
	if len(res.Files) != 6 {
		t.Fatalf("files %v, want 5 plots (sweep duration, requests, RSS, discovery allocations, time-to-merge) and a CSV", res.Files)
	}
	for _, f := range res.Files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestFleetWorkerQuick runs one real worker process over 1,000 and 10,000 registered stores on
// file:// with the same 20 in debt: the sweep starts every one, the reconcile reads every
// registered store, and the worker's peak RSS does not follow the fleet (10× the stores; a
// worker that kept every store it saw would hold ~100 MiB more). Loose: 1.5, not the issue's
// 1.3 that the documented run checks.
func TestFleetWorkerQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "fleet-worker", func(o *Options) { o.FleetSizes = []int{1000, 10000} })
	for _, n := range []int{1000, 10000} {
		if got, debt := value(t, res, fmt.Sprintf("started_%d", n)), value(t, res, fmt.Sprintf("debt_%d", n)); got != debt || debt != fleetWorkerQuickDebt {
			t.Errorf("%d stores: %v of %v MergeWal runs in debt ran (planted %d)", n, got, debt, fleetWorkerQuickDebt)
		}
		if got := value(t, res, fmt.Sprintf("reconcile_stores_%d", n)); got != float64(n) {
			t.Errorf("%d stores: the reconcile read %v registered stores", n, got)
		}
	}
	for _, k := range []string{"sweep_peak_ratio", "reconcile_peak_ratio"} {
		if got := value(t, res, k); got > 1.5 || got <= 0 {
			t.Errorf("%s = %.2f, want in (0, 1.5]", k, got)
		}
	}
}

// TestHostileQuick runs the hostile scenario at its quick size against this build's worker
// and checks that the output is complete and consistent, not that the build meets the targets:
// every case measured a peak RSS (or was killed by the guard) and got an answer to each
// request, the ratios are the peaks over the budget sum, and every memtable size has Get and
// List samples. docs/BENCHMARKS.md records the targets' figures.
func TestHostileQuick(t *testing.T) {
	var out string
	res := runQuick(t, "hostile", func(o *Options) { out = o.OutDir })
	sz := hostileSizesFor(Options{Quick: true})
	budget := value(t, res, "budget_sum_mib")
	if budget <= 0 {
		t.Fatalf("budget sum %v MiB", budget)
	}
	for _, key := range []string{"wide_rows", "big_append", "big_list", "conns"} {
		if value(t, res, key+"_skipped") == 1 {
			if key != "big_list" || value(t, res, "big_append_killed") != 1 {
				t.Errorf("%s: skipped though no earlier case of its worker was killed", key)
			}
			continue
		}
		peak, killed := value(t, res, key+"_peak_mib"), value(t, res, key+"_killed") == 1
		if peak <= 0 || (killed && peak < mib(sz.rssGuard)) {
			t.Errorf("%s: peak RSS %.0f MiB (killed %v, guard %s)", key, peak, killed, fmtBytes(sz.rssGuard))
		}
		if got, want := value(t, res, key+"_ratio"), peak/budget; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: ratio %v, want peak / budget sum = %v", key, got, want)
		}
		ok, refused, gone := value(t, res, key+"_ok"), value(t, res, key+"_refused"), value(t, res, key+"_no_answer")
		if ok+refused+gone < 1 || (!killed && gone > 0) {
			t.Errorf("%s: %v accepted, %v refused, %v without an answer (killed %v)", key, ok, refused, gone, killed)
		}
	}
	if value(t, res, "wide_rows_rows") <= 0 {
		t.Errorf("wide rows: no rows sent")
	}
	if value(t, res, "big_append_ok") == float64(sz.bigRows/sz.bigPerAppend) && value(t, res, "big_list_killed") == 0 {
		if got := value(t, res, "big_list_rows"); got != float64(sz.bigRows) {
			t.Errorf("big values: the List returned %v of the %d rows appended", got, sz.bigRows)
		}
	}
	if got := value(t, res, "conns_idle") + value(t, res, "conns_trickling") + value(t, res, "conns_dial_failed"); got != float64(sz.idleConns+sz.trickleConns) {
		t.Errorf("connections: %v accounted for, want %d", got, sz.idleConns+sz.trickleConns)
	}
	for _, n := range sz.memtableRows {
		for _, op := range []string{"get", "list"} {
			k := fmt.Sprintf("_%d", n)
			if value(t, res, op+"_n"+k) < 1 {
				t.Errorf("%s with %d unsealed rows: no samples", op, n)
			}
			if p50, p99 := value(t, res, op+"_p50_us"+k), value(t, res, op+"_p99_us"+k); p50 <= 0 || p99 < p50 {
				t.Errorf("%s with %d unsealed rows: p50 %v µs, p99 %v µs", op, n, p50, p99)
			}
		}
		if got := value(t, res, fmt.Sprintf("unsealed_%d", n)); got < 0 || got > float64(n) {
			t.Errorf("%d rows appended: %v unsealed when read", n, got)
		}
		if got := value(t, res, fmt.Sprintf("failed_reads_%d", n)); got != 0 {
			t.Errorf("%d unsealed rows: %v reads failed", n, got)
		}
	}
	if got := value(t, res, "get_p50_ratio_0"); got != 1 {
		t.Errorf("the empty memtable's own ratio is %v", got)
	}
	if len(res.Targets) != 8 || len(res.Tables) != 2 || len(res.Tables[0].Rows) != 4 || len(res.Tables[1].Rows) != len(sz.memtableRows) {
		t.Errorf("%d targets, %d tables; want 8 targets and tables of 4 cases and %d memtable sizes", len(res.Targets), len(res.Tables), len(sz.memtableRows))
	}
	raw, err := os.ReadFile(filepath.Join(out, "hostile.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		Values  map[string]float64 `json:"values"`
		Targets []Target           `json:"targets"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil || len(saved.Values) != len(res.Values) || len(saved.Targets) != len(res.Targets) {
		t.Errorf("hostile.json: %v; %d values and %d targets, want %d and %d", err, len(saved.Values), len(saved.Targets), len(res.Values), len(res.Targets))
	}
}

// TestStartRateQuick: at each in-flight level every start the server did not take timed out
// in the SDK's RPC budget (none was refused), none timed out while the server drained the
// level quickly, and the rate is a positive number (its size on this machine is in
// docs/benchmarks/fleet.md). A level that keeps more starts in flight than a loaded server
// drains within the budget times some out: that is the server's capacity, not a failure.
func TestStartRateQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "start-rate")
	for _, k := range startRateInFlight {
		rate := value(t, res, fmt.Sprintf("starts_per_s_%d", k))
		l := startRateLevel{InFlight: k, Starts: int(value(t, res, fmt.Sprintf("starts_%d", k))),
			Failed: int(value(t, res, fmt.Sprintf("failed_%d", k))), TimedOut: int(value(t, res, fmt.Sprintf("timed_out_%d", k))),
			Took: time.Duration(value(t, res, fmt.Sprintf("time_s_%d", k)) * float64(time.Second))}
		for _, p := range l.problems() {
			t.Error(p)
		}
		if rate <= 0 {
			t.Errorf("%d in flight: %v starts/s", k, rate)
		}
	}
}

// TestStartRateLevelProblems: a level whose starts time out behind a saturated server is
// fine; a refusal, or a time-out while the mean start waited a fraction of the budget, is not.
func TestStartRateLevelProblems(t *testing.T) {
	for _, c := range []struct {
		name string
		l    startRateLevel
		want int
	}{
		{"all started", startRateLevel{InFlight: 16, Starts: 300, Took: 12 * time.Second}, 0},
		// CI: 128 in flight at 18/s waited 7 s on average, and one start spent the 10 s budget.
		{"saturated server", startRateLevel{InFlight: 128, Starts: 300, Failed: 1, TimedOut: 1, Took: 17 * time.Second}, 0},
		{"refused", startRateLevel{InFlight: 128, Starts: 300, Failed: 1, Took: 17 * time.Second}, 1},
		{"stall behind a quiet queue", startRateLevel{InFlight: 16, Starts: 300, Failed: 1, TimedOut: 1, Took: 12 * time.Second}, 1},
		{"nothing started", startRateLevel{InFlight: 64, Starts: 300, Failed: 300, TimedOut: 300, Took: time.Minute}, 1},
	} {
		if got := c.l.problems(); len(got) != c.want {
			t.Errorf("%s: problems %q, want %d", c.name, got, c.want)
		}
	}
}

// TestFairnessQuick: behind 100 queued rollout merges the generic merges' p50 with fairness
// on is below the same server's without it (behind 200: 3.5–4.0 s against 13.5 s in
// docs/benchmarks/fairness.md; without fairness the wait grows with the backlog), and every
// kind completed activities while all were saturated.
func TestFairnessQuick(t *testing.T) {
	testtemporal.SkipShort(t)
	res := runQuick(t, "fairness", func(o *Options) { o.Backlogs = []int{0, 100} })
	if on, off := value(t, res, "light_p50_ms_dev_true_100"), value(t, res, "light_p50_ms_dev_false_100"); on >= off {
		t.Errorf("generic p50 behind 100 rollout merges: %.0f ms with fairness, %.0f ms without", on, off)
	}
	if dev := value(t, res, "share_worst_deviation_false"); dev >= 1 {
		t.Errorf("a kind got no share while all were saturated (worst deviation %.2f)", dev)
	}
}

// startRPCBudget is the SDK's default RPCTimeout, after which a start gives up retrying.
const startRPCBudget = 10 * time.Second

// startRateQuietWait is the mean wait of a start (Little's law: in flight / completions per
// second) under which no start may time out: a start that spends the whole budget while
// the mean one waits a quarter of it is a stall, not a queue.
const startRateQuietWait = startRPCBudget / 4

// problems is what is wrong with a level, none when it is fine: a start failed otherwise
// than by timing out (a refusal: options, search attributes or ID policy the server does not
// take), or a start timed out while the mean one waited under startRateQuietWait. Starts
// that time out because the level keeps more in flight than the server drains within
// startRPCBudget are the server's capacity on a loaded machine, which the rate reports. Pure.
func (l startRateLevel) problems() []string {
	var out []string
	if refused := l.Failed - l.TimedOut; refused > 0 {
		out = append(out, fmt.Sprintf("%d in flight: %d starts failed otherwise than by timing out", l.InFlight, refused))
	}
	if l.TimedOut > 0 && l.meanWait() < startRateQuietWait {
		out = append(out, fmt.Sprintf("%d in flight: %d starts timed out (%s budget) while the mean start waited %s",
			l.InFlight, l.TimedOut, startRPCBudget, fmtDur(l.meanWait())))
	}
	if l.rate() <= 0 {
		out = append(out, fmt.Sprintf("%d in flight: no start succeeded", l.InFlight))
	}
	return out
}
