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
// worst requests of each kind within the documented limits: its peak RSS against its budget sum,
// and its read latency against the unsealed rows of its memtable.

// hostileBudgetKnobs are the knobs whose sum is the worker's memory budget.
var hostileBudgetKnobs = []string{"cache-bytes", "read-budget-bytes", "merge-budget-bytes", "memtable-bytes", "body-budget-bytes", "page-budget-bytes"}

// hostileReportedKnobs are the knobs the child reports.
var hostileReportedKnobs = append([]string{"max-body-bytes", "max-row-bytes", "max-append-rows", "page-bytes",
	"max-connections", "http-read-timeout", "http-write-timeout", "flush-interval"}, hostileBudgetKnobs...)

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
	return hostileSizes{
		wideAppends: 3, wideBody: fullOrQuick(o, 8<<20, 256<<10), wideColumns: 255,
		bigRows: fullOrQuick(o, 40, 10), bigValue: 500_000, bigPerAppend: 10,
		idleConns: fullOrQuick(o, 2000, 400), trickleConns: fullOrQuick(o, 200, 40), connHold: fullOrQuick(o, 15*time.Second, 3*time.Second),
		memtableRows: fullOrQuick(o, []int{0, 1_000, 100_000, 1_000_000}, []int{0, 1_000, 10_000}),
		getSamples:   fullOrQuick(o, 500, 200), listPages: fullOrQuick(o, 200, 100), sampleBudget: fullOrQuick(o, 3*time.Minute, 20*time.Second),
		rssGuard: cmp.Or(o.RSSGuard, fullOrQuick[int64](o, 8<<30, 2<<30)), caseTimeout: fullOrQuick(o, 10*time.Minute, 2*time.Minute),
	}
}

func runHostile(ctx context.Context, o Options, res *Result, dir string) error {
	sz := hostileSizesFor(o)
	res.params("worker", "one child process per case, worker.Run without Temporal (HTTP-only), the build's defaults",
		"storage", "file:// (nosync)",
		"wide_rows", fmt.Sprintf("%d concurrent appends of %s of {\"id\":\"r0000001\"} rows, id + %d nullable columns", sz.wideAppends, fmtBytes(int64(sz.wideBody)), sz.wideColumns),
		"big_values", fmt.Sprintf("%d rows of %d kB of '<', %d per append, then a List of all of them", sz.bigRows, sz.bigValue/1000, sz.bigPerAppend),
		"connections", fmt.Sprintf("%d idle + %d trickling a body 1 byte/100 ms, held %s", sz.idleConns, sz.trickleConns, sz.connHold),
		"memtable_rows", sz.memtableRows, "rss_guard", fmtBytes(sz.rssGuard))

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

// hostileWorker is a worker child of the hostile scenario with a client to it.
type hostileWorker struct {
	child  *workerChild
	client *hostileClient
	sz     hostileSizes
	o      Options
	killed bool // set when a guard killed the child; every later phase is skipped
}

// startHostileWorker starts a worker child on storage url with knobs set over the defaults.
func startHostileWorker(ctx context.Context, o Options, sz hostileSizes, url, instance string, knobs map[string]string) (*hostileWorker, error) {
	ch, err := startWorkerChild(ctx, o, "hostile", workerChildParams{URL: url, Instance: instance, Knobs: knobs})
	if err != nil {
		return nil, err
	}
	return &hostileWorker{child: ch, client: newHostileClient(ch.ready.Addr), sz: sz, o: o}, nil
}

func (w *hostileWorker) stop() {
	w.client.close()
	w.child.stop()
}

// hostileCase is one measured phase: the worker's answers and its peak RSS meanwhile.
type hostileCase struct {
	Key, Name, Request string
	Answers            []answer
	// Note and Counts are what the phase observed beyond the answers (values "<key>_<name>").
	Note   string
	Counts map[string]float64
	rssSpan
	Killed, Skipped   bool
	Elapsed           time.Duration
	OK, Refused, Gone int
}

// phase runs f under the RSS guard and reads the child's peak RSS (reset before).
func (w *hostileWorker) phase(ctx context.Context, key, name, request string, f func(ctx context.Context) ([]answer, string, map[string]float64)) hostileCase {
	c := hostileCase{Key: key, Name: name, Request: request}
	if w.killed || w.child.exited() {
		c.Skipped = true
		c.Note = "skipped: the worker was killed by the RSS guard in an earlier phase"
		return c
	}
	c.Before = w.child.resetPeak()
	endGuard := guardRSS(w.child, w.sz.rssGuard)
	cctx, cancel := context.WithTimeout(ctx, w.sz.caseTimeout)
	start := time.Now()
	c.Answers, c.Note, c.Counts = f(cctx)
	c.Elapsed = time.Since(start)
	cancel()
	if peakAtKill := endGuard(); peakAtKill > 0 {
		c.Killed, c.Peak, w.killed = true, peakAtKill, true
	} else {
		c.Peak = w.child.peak()
	}
	for _, a := range c.Answers {
		switch {
		case a.ok():
			c.OK++
		case a.Status > 0:
			c.Refused++
		default:
			c.Gone++
		}
	}
	w.o.progressf("hostile: %s: %s; peak RSS %.0f MiB (before %.0f MiB)%s in %s", name, answers(c.Answers), mib(c.Peak), mib(c.Before),
		map[bool]string{true: ", KILLED by the RSS guard", false: ""}[c.Killed], fmtDur(c.Elapsed))
	return c
}

// rssGuardPoll bounds the guard's overshoot to tens of MiB at a few GiB/s of growth.
const rssGuardPoll = 10 * time.Millisecond

// guardRSS kills c once its RSS passes limit (the machine's memory is shared); end stops the guard
// and returns the peak RSS it killed at (0 = none).
func guardRSS(c *workerChild, limit int64) (end func() int64) {
	var peakAtKill int64
	stop := poll(rssGuardPoll, func() {
		if peakAtKill == 0 && c.rss() > limit {
			peakAtKill = max(c.peak(), c.rss())
			c.kill()
		}
	})
	return func() int64 { stop(); return peakAtKill }
}
