package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// overheadServer is one server of the comparison with its node and the store merged through it.
type overheadServer struct {
	name     string
	tenv     *temporalEnv
	node     *node
	bare     tworker.Worker
	viaWF    *store.Store
	metrics  int // the dev server's Prometheus port (0 = none)
	wfRates  []float64
	wfP50    []float64
	bareP50  []float64
	requests float64 // persistence requests during the merges
	// mergeOps sums the merge windows' persistence counters, less idleOps over each window.
	mergeOps, idleOps persistenceOps
	bill              *temporalBill // the MergeWal runs' Temporal actions, counted from their histories
	// idleReqPerSec and idleCPUPct are the idle server's requests/s and CPU (% of a core).
	idleReqPerSec, idleCPUPct float64
}

// temporalOverhead is the temporal-overhead scenario (docs/benchmarks/temporal-overhead.md): 1 MiB
// merges through MergeWal against a direct loop, on each server in turn (without --temporal: two
// dev servers and the PostgreSQL cluster), a bare workflow, persistence and CPU cost, and one sweep
// over idle stores.
func temporalOverhead(ctx context.Context, o Options, res *Result, dir string) error {
	merges, idleWindow := fullOrQuick(o, 20, 5), fullOrQuick(o, 60*time.Second, 10*time.Second)
	idle := cmp.Or(max(o.Stores, 0), fullOrQuick(o, 1000, 100))
	res.params("merges_per_rep", merges, "merge_size", "1 MiB (one generation)", "idle_stores", idle,
		"storage", "file:// with fsync")
	url := fileURL(filepath.Join(dir, "store"), false)
	db, err := store.OpenDB(ctx, url, storeOptions("overhead", o.logger(), func(so *store.Options) {
		so.Budget = store.NewBudget(worker.DefaultConfig().MergeBudgetBytes)
	}))
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))

	var servers []*overheadServer
	defer func() {
		for _, sv := range servers {
			if sv.bare != nil {
				sv.bare.Stop()
			}
			if sv.node != nil {
				sv.node.stop(ctx)
			}
			sv.tenv.close()
		}
	}()
	type variant struct {
		name     string
		defaults bool
		cluster  bool // the production server on PostgreSQL instead of a dev server
	}
	variants := []variant{{"tuned", false, false}, {"server defaults", true, false}, {"postgres cluster", false, true}}
	if o.Temporal != "" {
		variants = []variant{{"given server", false, false}}
	}
	for i, v := range variants {
		sv := &overheadServer{name: v.name, mergeOps: persistenceOps{}}
		dev := devserver.Options{ServerDefaults: v.defaults}
		if o.Temporal == "" {
			if sv.metrics, err = testbin.FreePort(); err != nil {
				return err
			}
			dev.MetricsPort = sv.metrics
		}
		logDir := filepath.Join(dir, fmt.Sprintf("server%d", i))
		if v.cluster {
			sv.tenv, err = startCluster(ctx, o, logDir, sv.metrics, nil)
			if errors.Is(err, testbin.ErrNotInstalled) && os.Getenv("CI") == "" {
				// Outside CI the third column is optional.
				res.note("No PostgreSQL-backed column: %v.", err)
				o.progressf("temporal-overhead: %v; running without the PostgreSQL-backed server", err)
				continue
			}
		} else {
			sv.tenv, err = startTemporal(ctx, o, logDir, dev)
		}
		if err != nil {
			return err
		}
		servers = append(servers, sv)
		sv.node, err = startNode(ctx, sv.tenv.client, db, nodeConfig{}, o.logger())
		if err != nil {
			return err
		}
		if sv.bare, err = startBareWorker(sv.tenv.client); err != nil {
			return err
		}
		if sv.viaWF, err = createGeneric(ctx, db, fmt.Sprintf("via-workflow-%d", i)); err != nil {
			return err
		}
	}
	if len(servers) > 1 {
		res.params("servers", "dev server with walkeeper's tuning ("+strings.Join(devserver.TunedDynamicConfig, ", ")+"), dev server with the server's defaults, and Temporal server v1.29.1 on PostgreSQL 15 (4 history shards, SQL visibility, docker-compose's dynamic config), side by side")
	}
	direct, err := createGeneric(ctx, db, "direct")
	if err != nil {
		return err
	}

	// scrapeAll reads every server's persistence counters (nil where it exports none).
	scrapeAll := func() []persistenceOps {
		out := make([]persistenceOps, len(servers))
		for i, sv := range servers {
			out[i], _ = scrapePersistence(ctx, sv.metrics)
		}
		return out
	}
	// Idle cost first, before any workflow ran: persistence requests and CPU per second.
	if o.Temporal == "" {
		o.progressf("temporal-overhead: measuring idle servers for %s", idleWindow)
		before, cpu0 := scrapeAll(), make([]time.Duration, len(servers))
		for i, sv := range servers {
			cpu0[i], _ = processCPU(sv.tenv.serverPID())
		}
		t0 := time.Now()
		select {
		case <-time.After(idleWindow):
		case <-ctx.Done():
			return ctx.Err()
		}
		el := time.Since(t0)
		for i, sv := range servers {
			after, err1 := scrapePersistence(ctx, sv.metrics)
			cpu1, err2 := processCPU(sv.tenv.serverPID())
			if err1 == nil {
				sv.idleOps = after.since(before[i]).scaled(1 / el.Seconds())
				sv.idleReqPerSec = sv.idleOps.total()
			}
			if err2 == nil {
				sv.idleCPUPct = 100 * (cpu1 - cpu0[i]).Seconds() / el.Seconds()
			}
		}
	}

	const payload = 4 << 10
	rows := (1 << 20) / (payload + 64)
	var dRates, ratios, dP50 []float64
	seq := int64(0)
	// mergeVia writes one generation to sv's store and times the MergeWal that merges it.
	mergeVia := func(sv *overheadServer) (time.Duration, error) {
		seq++
		if err := writeGenerations(ctx, sv.viaWF, 1, rows, payload, 1<<30, seq<<20); err != nil {
			return 0, err
		}
		t0 := time.Now()
		run, err := contract.StartMergeWal(ctx, sv.tenv.client, sv.viaWF.Target(), contract.MergeWalInput{})
		if err != nil {
			return 0, err
		}
		var out contract.MergeWalResult
		if err := run.Get(ctx, &out); err != nil {
			return 0, err
		}
		if out.Reclaimed != 1 {
			return 0, fmt.Errorf("MergeWal on %s reclaimed %d, want 1", sv.name, out.Reclaimed)
		}
		return time.Since(t0), nil
	}
	// Each repetition's merges are one window of persistence counters, read after settle, less the
	// idle rate.
	const settle = 2 * time.Second
	window := func() ([]persistenceOps, time.Time) {
		if o.Temporal != "" {
			return nil, time.Now()
		}
		time.Sleep(settle)
		return scrapeAll(), time.Now()
	}
	reqBefore := scrapeAll()
	for rep := 0; rep < o.reps(); rep++ {
		opsBefore, windowStart := window()
		wfLat := make([][]time.Duration, len(servers))
		var dLat []time.Duration
		for i := 0; i < merges; i++ {
			for k, sv := range servers {
				d, err := mergeVia(sv)
				if err != nil {
					return err
				}
				wfLat[k] = append(wfLat[k], d)
			}
			seq++
			if err := writeGenerations(ctx, direct, 1, rows, payload, 1<<30, seq<<20); err != nil {
				return err
			}
			t0 := time.Now()
			cr, err := direct.MergeOnce(ctx, "")
			if err != nil {
				return err
			}
			if cr.Reclaimed != 1 {
				return fmt.Errorf("direct merge reclaimed %d, want 1", cr.Reclaimed)
			}
			dLat = append(dLat, time.Since(t0))
			_ = compactBase(ctx, direct)
			for _, sv := range servers {
				_ = compactBase(ctx, sv.viaWF)
			}
		}
		if opsBefore != nil {
			opsAfter, windowEnd := window()
			for i, sv := range servers {
				if opsBefore[i] == nil || opsAfter[i] == nil {
					continue
				}
				sv.mergeOps.add(opsAfter[i].since(opsBefore[i]).less(sv.idleOps.scaled(windowEnd.Sub(windowStart).Seconds())))
			}
		}
		dl := summarize(dLat)
		dr := dl.perSecond()
		dRates, dP50 = append(dRates, dr), append(dP50, ms(dl.P50))
		line := fmt.Sprintf("temporal-overhead: rep %d/%d: direct %.1f merges/s (p50 %s)", rep+1, o.reps(), dr, fmtDur(dl.P50))
		for k, sv := range servers {
			wl := summarize(wfLat[k])
			wr := wl.perSecond()
			sv.wfRates, sv.wfP50 = append(sv.wfRates, wr), append(sv.wfP50, ms(wl.P50))
			if k == 0 {
				ratios = append(ratios, dr/wr)
			}
			line += fmt.Sprintf("; %s: workflow %.1f merges/s (p50 %s)", sv.name, wr, fmtDur(wl.P50))
		}
		o.progressf("%s", line)
		bare := make([][]time.Duration, len(servers))
		for i := 0; i < merges; i++ {
			for k, sv := range servers {
				d, err := execute(ctx, sv.tenv.client, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-bare-%d", time.Now().UnixNano()), TaskQueue: bareQueue}, bareWorkflow, nil)
				if err != nil {
					return fmt.Errorf("bare workflow on %s: %w", sv.name, err)
				}
				bare[k] = append(bare[k], d)
			}
		}
		for k, sv := range servers {
			sv.bareP50 = append(sv.bareP50, ms(summarize(bare[k]).P50))
		}
	}
	for i, sv := range servers {
		if after, err := scrapePersistence(ctx, sv.metrics); err == nil {
			sv.requests = after.total() - reqBefore[i].total()
		}
	}
	d, r, dp := spreadOf(dRates), spreadOf(ratios), spreadOf(dP50)
	header := []string{""}
	for _, sv := range servers {
		bill, err := countTemporalBill(ctx, sv.tenv.client, fmt.Sprintf("WorkflowType = '%s'", contract.MergeWalWorkflow))
		if err != nil {
			return err
		}
		sv.bill = bill
		header = append(header, "MergeWal, "+sv.name)
		key := strings.ReplaceAll(sv.name, " ", "_")
		res.values("%s_"+key, map[string]float64{"actions_per_merge": sv.actionsPerRun(), "wf_rate": spreadOf(sv.wfRates).Median,
			"orchestration_p50_ms": spreadOf(sv.wfP50).Median - dp.Median, "bare4_p50_ms": spreadOf(sv.bareP50).Median})
	}
	header = append(header, "direct prepare + commit")
	// row is one line of the table: label, a cell per server, then the direct loop's.
	row := func(label, direct string, cell func(sv *overheadServer) string) []string {
		out := []string{label}
		for _, sv := range servers {
			out = append(out, cell(sv))
		}
		return append(out, direct)
	}
	table := [][]string{
		row("merges/s", d.fmt("%.1f"), func(sv *overheadServer) string { return spreadOf(sv.wfRates).fmt("%.1f") }),
		row("p50 latency per merge (ms)", dp.fmt("%.0f"), func(sv *overheadServer) string { return spreadOf(sv.wfP50).fmt("%.0f") }),
		row("p50 orchestration over the direct loop (ms)", "0", func(sv *overheadServer) string {
			return fmt.Sprintf("%.0f", spreadOf(sv.wfP50).Median-dp.Median)
		}),
		row("bare workflow, 4 sequential no-op activities, p50 (ms)", "-", func(sv *overheadServer) string { return spreadOf(sv.bareP50).fmt("%.0f") }),
		row("Temporal actions per MergeWal run (one generation each, from history)", "-", func(sv *overheadServer) string {
			return fmt.Sprintf("%.1f", sv.actionsPerRun())
		}),
		row("$ per million generations merged, at list price", "-", func(sv *overheadServer) string {
			return fmt.Sprintf("%.0f", actioncount.USDPerMillion(float64(sv.bill.total().Actions), float64(sv.bill.reclaimed)))
		}),
	}
	if o.Temporal == "" {
		runs := float64(2 * merges * o.reps())
		table = append(table,
			row("persistence requests per merge + bare run", "-", func(sv *overheadServer) string { return fmt.Sprintf("%.0f", sv.requests/runs) }),
			row("persistence requests/s, idle", "-", func(sv *overheadServer) string { return fmt.Sprintf("%.1f", sv.idleReqPerSec) }),
			row("server CPU, idle (% of one core)", "-", func(sv *overheadServer) string { return fmt.Sprintf("%.1f", sv.idleCPUPct) }))
	}
	res.Tables = append(res.Tables, Table{
		Title:  "1 MiB merges, one at a time, each server in turn: median over repetitions, range in brackets",
		Header: header,
		Rows:   table,
	})
	if o.Temporal == "" {
		res.Tables = append(res.Tables, persistenceBreakdown(servers, merges*o.reps()))
	}
	w := spreadOf(servers[0].wfRates)
	// The first server's figures (tuned, or the one given): what the orchestration claim is about.
	res.values("%s", map[string]float64{"wf_rate": w.Median, "direct_rate": d.Median, "ratio": r.Median,
		"wf_p50_ms": spreadOf(servers[0].wfP50).Median, "direct_p50_ms": dp.Median})

	o.progressf("temporal-overhead: creating %d idle stores", idle)
	err = eachN(8, idle, func(i int) error {
		_, err := db.Create(ctx, store.Target{Kind: store.Kinds[i%len(store.Kinds)], Name: fmt.Sprintf("idle%05d", i)}, createOptsFor(store.Kinds[i%len(store.Kinds)]))
		return err
	})
	if err != nil {
		return err
	}
	// Each sweep follows a one-generation MergeWal on the same server, so the two compare side
	// by side: a sweep timed a phase after the merges once came out 2.5× their p50 because the
	// machine's load changed in between. At least five pairs, whose median ratio a busy moment
	// in one or two of them does not move. The merge leaves nothing pending, so the sweep has
	// nothing to start.
	var sweeps, pairRatios []float64
	nSweeps := max(o.reps(), 5)
	for rep := 0; rep < nSweeps; rep++ {
		sv := servers[0]
		merge, err := mergeVia(sv)
		if err != nil {
			return err
		}
		if err := compactBase(ctx, sv.viaWF); err != nil {
			return err
		}
		var out contract.MaintenanceSweepResult
		d, err := execute(ctx, sv.tenv.client, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-sweep-%d-%d", time.Now().UnixNano(), rep), TaskQueue: contract.TaskQueue},
			contract.MaintenanceSweepWorkflow, &out, contract.MaintenanceSweepInput{})
		if err != nil {
			return err
		}
		if n := out.StartedCount(); n != 0 {
			return fmt.Errorf("sweep over idle stores started %d workflows, want none", n)
		}
		sweeps, pairRatios = append(sweeps, d.Seconds()), append(pairRatios, d.Seconds()/merge.Seconds())
		o.progressf("temporal-overhead: sweep %d/%d over %d idle stores: %s, after a one-generation MergeWal of %s", rep+1, nSweeps, idle, fmtDur(d), fmtDur(merge))
	}
	sw, pr := spreadOf(sweeps), spreadOf(pairRatios)
	res.Tables = append(res.Tables, Table{
		Title:  "One MaintenanceSweep (list every kind's demand index, start nothing) over idle stores, each after a one-generation MergeWal",
		Header: []string{"stores", "time (s)", "stores/s", "sweep / the MergeWal before it"},
		Rows:   [][]string{{fmt.Sprint(idle), sw.fmt("%.2f"), fmt.Sprintf("%.0f", float64(idle)/sw.Median), pr.fmt("%.2f")}},
	})
	res.Values["sweep_s"], res.Values["sweep_vs_merge"] = sw.Median, pr.Median
	res.note("The direct loop is the floor: the same store.Prepare/Commit without Temporal. The workflow adds a start, two ListPendingShards listings (local activities: no activity dispatch) and the Prepare/CommitRound activities' scheduling.")
	res.note("Persistence requests are the servers' own persistence_requests counters (--metrics-port; the cluster's Prometheus endpoint), summed over operations; CPU is utime+stime of the server process from /proc (for the PostgreSQL cluster the Temporal server process only, PostgreSQL's own processes not included).")
	return nil
}

// actionsPerRun is the Temporal actions per MergeWal run.
func (sv *overheadServer) actionsPerRun() float64 {
	tot := sv.bill.total()
	return float64(tot.Actions) / float64(max(1, tot.Runs))
}

// The bare workflow: 4 sequential no-op activities, the least a 4-step orchestration costs.
const (
	bareQueue    = "bench-bare"
	bareWorkflow = "BenchBare4"
	bareActivity = "BenchNoop"
)

func bareWorkflowFn(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for i := 0; i < 4; i++ {
		if err := workflow.ExecuteActivity(ctx, bareActivity, i).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func bareActivityFn(_ context.Context, i int) (int, error) { return i, nil }

func startBareWorker(c client.Client) (tworker.Worker, error) {
	w := tworker.New(c, bareQueue, tworker.Options{WorkerStopTimeout: 5 * time.Second})
	w.RegisterWorkflowWithOptions(bareWorkflowFn, workflow.RegisterOptions{Name: bareWorkflow})
	w.RegisterActivityWithOptions(bareActivityFn, activity.RegisterOptions{Name: bareActivity})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start bare worker: %w", err)
	}
	return w, nil
}

// execute runs workflow wf on c to its end, its result into out (nil = none), and returns its time.
func execute(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, wf string, out any, args ...any) (time.Duration, error) {
	t0 := time.Now()
	run, err := c.ExecuteWorkflow(ctx, opts, wf, args...)
	if err == nil {
		err = run.Get(ctx, out)
	}
	return time.Since(t0), err
}

// processCPU is pid's user + system CPU time from /proc (ticks of 10 ms, USER_HZ).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
