// Package bench holds walkeeper's benchmark scenarios as library code: each scenario
// is a Run function that measures walkeeper and its comparison side by side in one run and
// returns a Result (markdown tables, targets, machine-readable values, written files).
//
// `walkeeper-bench <scenario> [--quick] [--out DIR]` runs them from the command line; the
// package's tests run every scenario in quick mode as a smoke test with loose assertions.
// docs/BENCHMARKS.md records real runs.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Options are shared by every scenario; each scenario field is the walkeeper-bench flag of
// the same meaning (cmd/walkeeper-bench), and a zero value takes the documented default.
type Options struct {
	Quick   bool   // --quick: the smoke-test size
	OutDir  string // --out: CSV, PNG, JSON and markdown files; "" = a new temporary directory
	WorkDir string // --work-dir: the stores a scenario writes; "" = a temporary directory
	Reps    int    // --reps: repetitions, 0 = 5 (1 with Quick); medians and spread are over them
	// Progress receives one line per step of a long run, Logger walkeeper's own logs (nil = none).
	Progress io.Writer
	Logger   *zap.Logger
	Temporal string // --temporal: a Temporal frontend's host:port; "" = start a dev server

	Duration            time.Duration // --duration (incident)
	Shards              int           // --shards (incident)
	Stores              int           // --stores (incident, temporal-overhead, start-rate)
	MergeMaxGenerations int           // --merge-max-generations (incident)
	Latency             time.Duration // --latency (incident, fleet): negative = none
	Backlogs            []int         // --backlogs (fairness)
	FairnessServers     []string      // --servers (fairness): "dev", "cluster"
	NoSticky            bool          // --no-sticky (fairness): process-wide
	FleetSizes          []int         // --sizes (fleet, fleet-worker)
	FleetVariants       []string      // --variants (fleet): "concurrency/batch"
	MemoryBudgets       []int64       // --budgets-mib (memory), in bytes
	MemoryParts         []string      // --parts (memory): "merges", "reads"
	RSSGuard            int64         // --rss-guard-mib (hostile), in bytes

	// Child runs a scenario's child half (bench/child.go), which writes JSON lines to stdout.
	Child bool
	// Reexec builds the command that runs scenario's child half (with Child set) in a fresh
	// process; nil = the scenarios with a child process cannot run.
	Reexec func(ctx context.Context, scenario string) *exec.Cmd
}

func (o Options) reps() int { return cmp.Or(max(o.Reps, 0), fullOrQuick(o, 5, 1)) }

// fullOrQuick is full, or quick with --quick: a scenario's size in each mode.
func fullOrQuick[T any](o Options, full, quick T) T {
	if o.Quick {
		return quick
	}
	return full
}

// latency is o.Latency, or def when it is 0; none when it is negative.
func (o Options) latency(def time.Duration) time.Duration {
	switch {
	case o.Latency < 0:
		return 0
	case o.Latency > 0:
		return o.Latency
	}
	return def
}

func (o Options) logger() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

// progress prints one timestamped line.
func (o Options) progressf(format string, args ...any) {
	if o.Progress == nil {
		return
	}
	fmt.Fprintf(o.Progress, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// workDir returns a fresh directory for stores and a cleanup function.
func (o Options) workDir(name string) (string, func(), error) {
	d, err := "", error(nil)
	if o.WorkDir != "" {
		d = filepath.Join(o.WorkDir, name+"-"+time.Now().Format("150405.000"))
		err = os.MkdirAll(d, 0o755)
	} else {
		d, err = os.MkdirTemp("", "walkeeper-bench-"+name+"-")
	}
	if err != nil {
		return "", nil, err
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}

// Result is what a scenario measured.
type Result struct {
	Scenario string             `json:"scenario"`
	Quick    bool               `json:"quick"`
	Started  time.Time          `json:"started"`
	Elapsed  Duration           `json:"elapsed"`
	Params   []KV               `json:"params"`          // the scenario's parameters, in print order
	Tables   []Table            `json:"tables"`          // rendered as markdown
	Targets  []Target           `json:"targets"`         // the targets with the measured value
	Values   map[string]float64 `json:"values"`          // machine-readable numbers (tests assert on them)
	Notes    []string           `json:"notes,omitempty"` // free text lines printed after the tables
	Files    []string           `json:"files,omitempty"` // written to OutDir
}

// KV is one parameter.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Table is one markdown table.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Target is one issue target and whether this run met it.
type Target struct {
	Name     string `json:"name"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// Duration marshals as a Go duration string.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func newResult(name string, o Options) *Result {
	return &Result{Scenario: name, Quick: o.Quick, Started: time.Now(), Values: map[string]float64{}}
}

// params records parameters in print order, given as key, value, key, value, ...
// REQUIRES: an even number of arguments; an odd one is a bug in the scenario, so it panics.
func (r *Result) params(kv ...any) {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("bench: %s: Result.params got %d arguments, want key, value pairs "+
			"(key %v has no value)", r.Scenario, len(kv), kv[len(kv)-1]))
	}
	for i := 0; i < len(kv); i += 2 {
		r.Params = append(r.Params, KV{fmt.Sprint(kv[i]), fmt.Sprint(kv[i+1])})
	}
}

func (r *Result) target(name, goal, measured string, met bool) {
	r.Targets = append(r.Targets, Target{Name: name, Goal: goal, Measured: measured, Met: met})
}

// values records each of vs under key, its name put in for the key's %s ("b32_%s", "%s_1000").
func (r *Result) values(key string, vs map[string]float64) {
	for name, v := range vs {
		r.Values[strings.Replace(key, "%s", name, 1)] = v
	}
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Markdown renders the result for a terminal or docs/BENCHMARKS.md.
func (r *Result) Markdown() string {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "### %s (%s, %s, %s)\n\n", r.Scenario, mode, r.Started.UTC().Format("2006-01-02 15:04 UTC"), time.Duration(r.Elapsed).Round(time.Second))
	if len(r.Params) > 0 {
		var ps []string
		for _, p := range r.Params {
			ps = append(ps, p.Key+"="+p.Value)
		}
		fmt.Fprintf(&b, "Parameters: %s\n\n", strings.Join(ps, ", "))
	}
	for _, t := range r.Tables {
		if t.Title != "" {
			fmt.Fprintf(&b, "%s\n\n", t.Title)
		}
		b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---|", len(t.Header)) + "\n")
		for _, row := range t.Rows {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	if len(r.Targets) > 0 {
		b.WriteString("| target | goal | measured | met |\n|---|---|---|---|\n")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Goal, t.Measured, met)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	if len(r.Files) > 0 {
		fmt.Fprintf(&b, "Files: %s\n", strings.Join(r.Files, ", "))
	}
	return b.String()
}

// save writes <scenario>.json and <scenario>.md to dir.
func (r *Result) save(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.Scenario+".json"), raw, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.Scenario+".md"), []byte(r.Markdown()), 0o644)
}

// Scenario is one runnable benchmark.
type Scenario struct {
	Name  string
	Short string
	Run   func(ctx context.Context, o Options) (*Result, error)
}

// childHalves run in the child process of their scenario (Options.Child).
var childHalves = map[string]func(ctx context.Context, o Options) error{
	"memory": memoryChild, "fleet-worker": workerChildHalf, "hostile": workerChildHalf,
}

// scenario is a Scenario whose body records into a Result named after it.
func scenario(name, short string, body func(ctx context.Context, o Options, res *Result) error) Scenario {
	return Scenario{Name: name, Short: short, Run: func(ctx context.Context, o Options) (*Result, error) {
		res := newResult(name, o)
		if err := body(ctx, o, res); err != nil {
			return nil, err
		}
		return res, nil
	}}
}

// withDir gives body a work directory named after its scenario, removed when body returns.
func withDir(body func(ctx context.Context, o Options, res *Result, dir string) error) func(context.Context, Options, *Result) error {
	return func(ctx context.Context, o Options, res *Result) error {
		dir, cleanup, err := o.workDir(res.Scenario)
		if err != nil {
			return err
		}
		defer cleanup()
		return body(ctx, o, res, dir)
	}
}

// measured is a scenario that writes stores: a work directory of its own, reps its first param.
func measured(name, short string, body func(ctx context.Context, o Options, res *Result, dir string) error) Scenario {
	return scenario(name, short, withDir(func(ctx context.Context, o Options, res *Result, dir string) error {
		res.params("reps", o.reps())
		return body(ctx, o, res, dir)
	}))
}

// Scenarios lists every scenario in the priority order.
var Scenarios = []Scenario{
	scenario("incident", "incident replay: 20 shards, 300 rollout stores, 1 hot generic store; walkeeper vs the old serial sweeper (CSV + PNG)", runIncident),
	measured("commit-lock", "commit write-lock hold p50/p99 for 64 KiB, 1 MiB and 64 MiB merges on file:// and mem://", commitLock),
	measured("append-latency", "append latency p50/p99 with merges running vs idle", appendLatency),
	measured("merge-throughput", "merge throughput (MB/s of generations) vs raw I/O of the same bytes", mergeThroughput),
	measured("memory", "peak RSS of a child process: 12 concurrent merges of half the budget each (32 MiB, 128 MiB, 1 GiB), and 16 concurrent Lists over 2,000 pending generations", runMemory),
	measured("parallel-prepare", "prepare of 4 shards in parallel vs serially", parallelPrepare),
	measured("temporal-overhead", "merges/s through MergeWal workflows vs a direct loop; time to sweep 1,000 idle stores", temporalOverhead),
	scenario("fleet", "one MaintenanceSweep over 10k and 100k registered stores (1% in debt, 10 ms/request) through the demand index", runFleet),
	scenario("fairness", "generic merge latency p50/p99 behind 0, 400, 2,000, 10,000 queued rollout merges, and each kind's share when all are saturated: Temporal task-queue fairness on vs off", withDir(runFairness)),
	scenario("start-rate", "MergeWal starts/s the Temporal server accepts at 16, 64 and 128 in flight with nothing running what it starts", runStartRate),
	scenario("fleet-worker", "peak RSS of one worker process during a sweep and a reconcile at 10k and 1M registered stores on file://, the same debt", withDir(runFleetWorker)),
	measured("read-amp", "Get/List latency at 0, 16, 256, 1024 pending generations and after merging", readAmp),
	scenario("hostile", "one worker process under hostile clients: peak RSS vs its budgets for wide rows, big values, 2,000 connections; Get/List latency at 0 to 1M unsealed rows", withDir(runHostile)),
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Run runs one scenario and saves its result files to OutDir.
func Run(ctx context.Context, name string, o Options) (*Result, error) {
	sc, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q", name)
	}
	if child := childHalves[name]; child != nil {
		if o.Child {
			return nil, child(ctx, o)
		}
		if o.Reexec == nil {
			return nil, fmt.Errorf("%s: needs a child process (Options.Reexec; run it through walkeeper-bench)", name)
		}
	}
	if o.OutDir == "" && !o.Child {
		d, err := os.MkdirTemp("", "walkeeper-bench-out-")
		if err != nil {
			return nil, err
		}
		o.OutDir = d
	}
	if o.OutDir != "" {
		if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res, err := sc.Run(ctx, o)
	if err != nil || res == nil || o.Child {
		return res, err
	}
	res.Elapsed = Duration(time.Since(start))
	return res, res.save(o.OutDir)
}

// inTurn reverses sides on odd repetitions, so that drift hits every side alike.
func inTurn[T any](rep int, sides ...T) []T {
	sides = slices.Clone(sides)
	if rep%2 == 1 {
		slices.Reverse(sides)
	}
	return sides
}

// statistics

// durStats summarises a sample of durations.
type durStats struct {
	N                       int
	Min, P50, P99, Max, Sum time.Duration
}

func summarize(ds []time.Duration) durStats {
	if len(ds) == 0 {
		return durStats{}
	}
	s := slices.Sorted(slices.Values(ds))
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return durStats{N: len(s), Min: s[0], P50: pct(s, 50), P99: pct(s, 99), Max: s[len(s)-1], Sum: sum}
}

// perSecond is the sample's events per second of their summed time: a one-at-a-time rate.
func (s durStats) perSecond() float64 { return float64(s.N) / s.Sum.Seconds() }

// pct is the nearest-rank percentile of a sorted, non-empty sample.
func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// spread is the median and range of repeated measurements of one number.
type spread struct {
	Median, Min, Max float64
	N                int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s, n := slices.Sorted(slices.Values(xs)), len(xs)
	return spread{Median: (s[(n-1)/2] + s[n/2]) / 2, Min: s[0], Max: s[n-1], N: n}
}

// spreadBy is the spread of f over xs.
func spreadBy[T any](xs []T, f func(T) float64) spread {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return spreadOf(vs)
}

// fmt renders "median (min–max, n=N)" with the given format for each number.
func (s spread) fmt(f string) string {
	if s.N <= 1 {
		return fmt.Sprintf(f, s.Median)
	}
	return fmt.Sprintf(f+" (%s–%s, n=%d)", s.Median, fmt.Sprintf(f, s.Min), fmt.Sprintf(f, s.Max), s.N)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", ms(d))
	default:
		return fmt.Sprintf("%.0f µs", us(d))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// writeCSV writes header and rows to path, floats with 3 decimals.
func writeCSV(path string, header []string, rows [][]any) error {
	var b strings.Builder
	b.WriteString(strings.Join(header, ",") + "\n")
	for _, row := range rows {
		for i, v := range row {
			if i > 0 {
				b.WriteByte(',')
			}
			if f, ok := v.(float64); ok {
				fmt.Fprintf(&b, "%.3f", f)
			} else {
				fmt.Fprint(&b, v)
			}
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
