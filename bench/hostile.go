package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/walkeeper/walkeeper/worker"
)

// The hostile scenario (docs/benchmarks/hostile.md) sends a worker child (HTTP-only worker.Run) the
// worst requests of each kind within the documented limits: its peak RSS against its budget sum, and
// its read latency against the unsealed rows of its memtable.

// hostileBudgetKnobs are the knobs whose sum is the worker's memory budget.
var hostileBudgetKnobs = []string{"cache-bytes", "read-budget-bytes", "merge-budget-bytes", "memtable-bytes", "body-budget-bytes", "page-budget-bytes"}

// hostileReportedKnobs are the knobs the child reports.
var hostileReportedKnobs = append([]string{"max-body-bytes", "max-row-bytes", "max-append-rows", "page-bytes",
	"max-connections", "http-read-timeout", "http-write-timeout", "flush-interval"}, hostileBudgetKnobs...)

// hostileSizes are the scenario's sizes.
type hostileSizes struct {
	wideAppends, wideBody, wideColumns int // concurrent appends of wideBody bytes to id + wideColumns nullable columns
	bigRows, bigValue, bigPerAppend    int // bigRows rows of bigValue bytes, bigPerAppend per append
	idleConns, trickleConns            int // idle raw connections and trickled bodies, held connHold
	connHold                           time.Duration
	memtableRows                       []int // latency: unsealed rows per level
	getSamples, listPages              int
	sampleBudget                       time.Duration
	rssGuard                           int64         // a child whose RSS passes it is killed
	caseTimeout                        time.Duration // bounds one memory case
}

func hostileSizesFor(o Options) hostileSizes {
	s := hostileSizes{
		wideAppends: 3, wideBody: 8 << 20, wideColumns: 255,
		bigRows: 40, bigValue: 500_000, bigPerAppend: 10,
		idleConns: 2000, trickleConns: 200, connHold: 15 * time.Second,
		memtableRows: []int{0, 1_000, 100_000, 1_000_000},
		getSamples:   500, listPages: 200, sampleBudget: 3 * time.Minute,
		rssGuard: 8 << 30, caseTimeout: 10 * time.Minute,
	}
	if o.Quick {
		s.wideBody, s.bigRows = 256<<10, 10
		s.idleConns, s.trickleConns, s.connHold = 400, 40, 3*time.Second
		s.memtableRows = []int{0, 1_000, 10_000}
		s.getSamples, s.listPages, s.sampleBudget = 200, 100, 20*time.Second
		s.rssGuard, s.caseTimeout = 2<<30, 2*time.Minute
	}
	s.rssGuard = cmp.Or(o.RSSGuard, s.rssGuard)
	return s
}

// runHostile is the hostile scenario.
func runHostile(ctx context.Context, o Options, res *Result, dir string) error {
	sz := hostileSizesFor(o)
	res.param("worker", "one child process per case, worker.Run without Temporal (HTTP-only), the build's defaults")
	res.param("storage", "file:// (nosync)")
	res.param("wide_rows", fmt.Sprintf("%d concurrent appends of %s of {\"id\":\"r0000001\"} rows, id + %d nullable columns", sz.wideAppends, fmtBytes(int64(sz.wideBody)), sz.wideColumns))
	res.param("big_values", fmt.Sprintf("%d rows of %d kB of '<', %d per append, then a List of all of them", sz.bigRows, sz.bigValue/1000, sz.bigPerAppend))
	res.param("connections", fmt.Sprintf("%d idle + %d trickling a body 1 byte/100 ms, held %s", sz.idleConns, sz.trickleConns, sz.connHold))
	res.param("memtable_rows", fmt.Sprint(sz.memtableRows))
	res.param("rss_guard", fmtBytes(sz.rssGuard))

	knobs, cases, err := runHostileMemory(ctx, o, sz, dir)
	if err != nil {
		return err
	}
	lat, err := runHostileLatency(ctx, o, sz, filepath.Join(dir, "latency"))
	if err != nil {
		return err
	}
	hostileReport(res, sz, knobs, cases, lat)
	return nil
}

// hostileKnobs is what a child said about its configuration (hostileReportedKnobs).
type hostileKnobs map[string]string

// budgetSum is the sum of hostileBudgetKnobs; a knob a build lacks adds nothing.
func (k hostileKnobs) budgetSum() int64 {
	var sum int64
	for _, name := range hostileBudgetKnobs {
		if n, err := worker.ParseBytes(k[name]); err == nil {
			sum += n
		}
	}
	return sum
}

// describe renders the knobs as "name=value".
func (k hostileKnobs) describe() string {
	var parts []string
	for _, name := range hostileReportedKnobs {
		if v, ok := k[name]; ok {
			parts = append(parts, name+"="+v)
		}
	}
	return strings.Join(parts, ", ")
}

// fmtBytes renders n as B, KiB, MiB or GiB.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MiB", mib(n))
	case n >= 1<<10:
		return fmt.Sprintf("%.4g KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
