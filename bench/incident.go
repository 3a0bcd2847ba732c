package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"gonum.org/v1/plot/vg"

	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// incidentParams are the knobs of the incident replay (docs/benchmarks/incident.md).
type incidentParams struct {
	Shards             int
	Rollout            int
	Duration           time.Duration
	Latency            time.Duration // modelled object-store round trip per request
	SealEvery          time.Duration // flush sweeper period (both sides)
	SweepEvery         time.Duration // walkeeper schedule / baseline cleanup period
	CountTrigger       int
	GenericEvery       time.Duration // one-row append to the hot store, per shard
	RolloutEvery       time.Duration // one-row append to a random rollout store, per shard
	StoreTimeout       time.Duration // baseline per-store timeout: max(5 × interval, 30 s)
	MaxGens            int           // merge_max_generations of both systems
	Parallel           bool
	PrepareConcurrency int // --merge-prepare-concurrency on both sides; 0 = the default
}

// wide says whether the replay runs more shards than the incident's 20 on one machine; it then
// runs on mem://, since file creation, not the modelled latency, would limit the seal rate.
func (p incidentParams) wide() bool { return p.Shards > 20 }

// storage names the replay's storage.
func (p incidentParams) storage() string {
	return map[bool]string{false: "file:// without fsync", true: "mem://"}[p.wide()]
}

// wideTablePrepareConcurrency is the prepare concurrency past 20 shards: at the default 4 a round
// over 200 shards outlasts a shard's sealing of merge_max_generations generations.
const wideTablePrepareConcurrency = 16

// Sides of the incident replay.
const (
	sideWalkeeper = "walkeeper"
	sideBaseline  = "baseline"
)

// sharedWorkerNodes is how many nodes serve the shared queue in a wide replay.
const sharedWorkerNodes = 4

// baselineLabel names the baseline in tables and plots.
const baselineLabel = "baseline (old serial sweeper)"

func incidentDefaults(o Options) incidentParams {
	p := incidentParams{
		// A flag's value where it is given (positive), else the mode's default.
		Shards:     cmp.Or(max(o.Shards, 0), fullOrQuick(o, 20, 4)),
		Rollout:    cmp.Or(max(o.Stores, 0), fullOrQuick(o, 300, 120)),
		Duration:   cmp.Or(max(o.Duration, 0), fullOrQuick(o, 4*time.Minute, 40*time.Second)),
		Latency:    o.latency(fullOrQuick(o, 10*time.Millisecond, 25*time.Millisecond)),
		SealEvery:  time.Second,
		SweepEvery: 5 * time.Second,
		// 45 s per side leaves no room for a trigger at 50 to fire and finish.
		CountTrigger: fullOrQuick(o, 50, 20),
		GenericEvery: 250 * time.Millisecond,
		RolloutEvery: 5 * time.Second,
		StoreTimeout: 30 * time.Second,
		MaxGens:      cmp.Or(max(o.MergeMaxGenerations, 0), store.DefaultOptions().MergeMaxGenerations),
		// Parallel prepares, as the worker's default; WALKEEPER_BENCH_SERIAL=1 replays serial ones.
		Parallel: worker.DefaultConfig().MergeParallelPrepare && os.Getenv("WALKEEPER_BENCH_SERIAL") == "",
	}
	if p.wide() {
		p.PrepareConcurrency = wideTablePrepareConcurrency
	}
	return p
}

// incidentRun is one repetition's outcome.
type incidentRun struct{ wk, base incidentSide }

type sample struct {
	T       float64
	Pending []int // per shard index
}

// runIncident replays the generic-WAL-merge starvation incident at 2-core scale: walkeeper next to
// the old serial sweeper (baselineSweeper), one after the other with identical traffic and storage.
func runIncident(ctx context.Context, o Options, res *Result) error {
	p := incidentDefaults(o)
	res.params("shards", p.Shards, "rollout_stores", p.Rollout, "hot_generic_stores", 1, "duration", p.Duration,
		"latency_per_request", p.Latency, "seal_every", p.SealEvery, "sweep_every", p.SweepEvery,
		"count_trigger", p.CountTrigger, "generic_append_every_per_shard", p.GenericEvery,
		"rollout_append_every_per_shard", p.RolloutEvery, "baseline_store_timeout", p.StoreTimeout,
		"merge_max_generations", p.MaxGens, "prepare_concurrency", p.PrepareConcurrency,
		"storage", p.storage(),
		"walkeeper_count_trigger_parallel_prepare", p.Parallel, "reps", o.reps())
	if p.wide() {
		res.params("shared_queue_workers", fmt.Sprintf("first %d nodes; 1 poller per shard queue; workflow deadlock detector 10 s", sharedWorkerNodes))
	}
	// Production has 20 machines; here both systems and Temporal share 2 cores.
	timeScale := 30 * time.Second / p.SealEvery
	o.progressf("incident: scale — %d shards (production 20), %d rollout stores resident in every shard (production: hundreds per worker), time compressed %d× (seal 30 s → %s), at most %.2f cores per node (2 cores / %d nodes, shared with Temporal; production: one machine per worker)",
		p.Shards, p.Rollout, timeScale, p.SealEvery, 2/float64(p.Shards), p.Shards)
	res.params("time_scale", fmt.Sprintf("%d× (production flush 30 s)", timeScale),
		"cpu_per_node", fmt.Sprintf("≤ %.2f cores", 2/float64(p.Shards)))

	var runs []incidentRun
	for rep := 0; rep < o.reps(); rep++ {
		o.progressf("incident: repetition %d/%d", rep+1, o.reps())
		run, err := incidentOnce(ctx, o, p, rep)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep+1, err)
		}
		runs = append(runs, run)
		if rep == 0 || o.OutDir != "" {
			files, err := writeIncidentFiles(o.OutDir, rep, p, run)
			if err != nil {
				return err
			}
			res.Files = append(res.Files, files...)
		}
		o.progressf("incident: rep %d: max pending per shard walkeeper %d, baseline %d (final %d vs %d; baseline slope %.1f gens/min)",
			rep+1, run.wk.peak(), run.base.peak(), run.wk.final(), run.base.final(), secondHalfSlope(run.base.samples))
	}

	// both is f over the repetitions, of the walkeeper side and of the baseline.
	both := func(f func(s incidentSide) float64) (wk, base spread) {
		return spreadBy(runs, func(r incidentRun) float64 { return f(r.wk) }), spreadBy(runs, func(r incidentRun) float64 { return f(r.base) })
	}
	wkMax, baseMax := both(func(s incidentSide) float64 { return float64(s.peak()) })
	wkFinal, baseFinal := both(func(s incidentSide) float64 { return float64(s.final()) })
	wkMean2, baseMean2 := both(func(s incidentSide) float64 { return secondHalfMean(s.samples) })
	wkSlope, baseSlope := both(func(s incidentSide) float64 { return secondHalfSlope(s.samples) })
	wkRo, baseRo := both(func(s incidentSide) float64 { return float64(s.rollMax) })
	wkErr, baseErr := both(func(s incidentSide) float64 { return float64(s.appErrs) })
	wkReq, baseReq := both(func(s incidentSide) float64 { return float64(s.requests) / p.Duration.Seconds() })
	_, cycle := both(func(s incidentSide) float64 { return summarize(s.cycles).P50.Seconds() })
	_, cycleMax := both(func(s incidentSide) float64 { return summarize(s.cycles).Max.Seconds() })
	perGen, _ := both(func(s incidentSide) float64 { return s.bill.perGeneration() })

	res.Tables = append(res.Tables, Table{
		Title:  "Hot generic store: pending generations per shard (median over repetitions, range in brackets)",
		Header: []string{"", "walkeeper", baselineLabel, "second side / walkeeper"},
		Rows: [][]string{
			{"max pending in any shard over the run", wkMax.fmt("%.0f"), baseMax.fmt("%.0f"), fmt.Sprintf("%.1f×", baseMax.Median/math.Max(wkMax.Median, 1))},
			{"max pending in any shard at the end", wkFinal.fmt("%.0f"), baseFinal.fmt("%.0f"), fmt.Sprintf("%.1f×", baseFinal.Median/math.Max(wkFinal.Median, 1))},
			{"mean of max pending, second half", wkMean2.fmt("%.1f"), baseMean2.fmt("%.1f"), ""},
			{"trend of max pending, second half (gens/min)", wkSlope.fmt("%+.1f"), baseSlope.fmt("%+.1f"), ""},
			{"rollout stores: max pending in any shard at the end", wkRo.fmt("%.0f"), baseRo.fmt("%.0f"), ""},
			{"storage requests per second (all shards)", wkReq.fmt("%.0f"), baseReq.fmt("%.0f"), ""},
			{"failed appends", wkErr.fmt("%.0f"), baseErr.fmt("%.0f"), ""},
			{"baseline cleanup cycle p50 / max (s)", "", cycle.fmt("%.1f") + " / " + cycleMax.fmt("%.1f"), ""},
		},
	})
	if last := runs[len(runs)-1].wk.bill; last != nil {
		res.Tables = append(res.Tables, last.table(fmt.Sprintf(
			"walkeeper's Temporal actions, last repetition (every workflow's history, Temporal Cloud's definition; generations from the MergeWal runs' round commits, %d runs still open at the end included)", last.openMerges)))
	}
	res.target("Temporal actions per merged generation (every workflow, walkeeper side)", fmt.Sprintf("≤ %.2f", maxActionsPerGeneration),
		perGen.fmt("%.3f"), perGen.Max > 0 && perGen.Max <= maxActionsPerGeneration)
	limit := 2 * p.CountTrigger
	res.target("walkeeper max pending per shard, whole run", fmt.Sprintf("≤ %d (2 × count trigger)", limit), wkMax.fmt("%.0f"), wkMax.Max <= float64(limit))
	res.target("baseline grows without bound", "rising trend, above walkeeper", fmt.Sprintf("%s gens/min, end %s", baseSlope.fmt("%+.1f"), baseFinal.fmt("%.0f")),
		baseSlope.Min > 0 && baseFinal.Min > wkFinal.Max)
	res.values("%s", map[string]float64{"actions_per_generation": perGen.Median, "usd_per_million_generations": perGen.Median * actioncount.ListPriceUSDPerMillion,
		"count_trigger": float64(p.CountTrigger), "walkeeper_mean2_max": wkMean2.Max, "baseline_mean2_min": baseMean2.Min,
		"walkeeper_max": wkMax.Max, "walkeeper_max_median": wkMax.Median, "baseline_max_median": baseMax.Median,
		"baseline_final_min": baseFinal.Min, "walkeeper_final_max": wkFinal.Max, "baseline_slope_median": baseSlope.Median,
		"baseline_cycle_p50_s": cycle.Median})
	res.note("The baseline merges the hot generic store only in its cleanup sweep, one pass of at most merge_max_generations of its own shard per visit, and reaches the generic kind only after walking every resident rollout store; a cycle longer than merge_max_generations × the seal interval makes the hot store's debt grow without bound (cycle p50 above).")
	res.note("The two systems run one after the other in the same invocation (order alternating by repetition), each with the machine to itself, identical traffic and the same storage model: %s plus %s added to every storage request.", p.storage()+map[bool]string{true: " (past 20 shards the local file system's file creation, not the modelled object store, limited the seal rate)"}[p.wide()], p.Latency)
	return nil
}

// maxActionsPerGeneration is $12.50 per million generations merged at list price.
const maxActionsPerGeneration = 0.25

// incidentSide is one system's outcome in one repetition.
type incidentSide struct {
	samples  []sample // at least one
	requests int64
	appErrs  int64
	rollMax  int             // max pending of any rollout store shard at the end
	cycles   []time.Duration // baseline cleanup cycles
	bill     *temporalBill   // walkeeper: every workflow's Temporal actions
}

// peak is the max pending in any shard over the run.
func (s incidentSide) peak() int {
	m := 0
	for _, x := range s.samples {
		m = max(m, slices.Max(x.Pending))
	}
	return m
}

// final is the max pending in any shard at the last sample.
func (s incidentSide) final() int { return slices.Max(s.samples[len(s.samples)-1].Pending) }

// incidentOnce runs both systems one after the other, the order alternating by repetition.
func incidentOnce(ctx context.Context, o Options, p incidentParams, rep int) (incidentRun, error) {
	var run incidentRun
	sides := map[string]*incidentSide{sideWalkeeper: &run.wk, sideBaseline: &run.base}
	for _, name := range inTurn(rep, sideWalkeeper, sideBaseline) {
		sd, err := incidentSideRun(ctx, o, p, rep, name)
		if err == nil && len(sd.samples) == 0 {
			err = errors.New("no samples")
		}
		if err != nil {
			return run, fmt.Errorf("%s: %w", name, err)
		}
		*sides[name] = sd
	}
	return run, nil
}

func incidentSideRun(ctx context.Context, o Options, p incidentParams, rep int, sideName string) (incidentSide, error) {
	var out incidentSide
	isWK := sideName != sideBaseline
	dir, cleanup, err := o.workDir("incident-" + sideName)
	if err != nil {
		return out, err
	}
	defer cleanup()
	log := o.logger().With(zap.String("side", sideName))

	var tenv *temporalEnv
	if isWK {
		if tenv, err = startTemporal(ctx, o, dir, devserver.Options{}); err != nil {
			return out, err
		}
		defer tenv.close()
	}
	hot := genericTarget(fmt.Sprintf("hot-%d", rep))
	var rollout []store.Target
	for i := 0; i < p.Rollout; i++ {
		rollout = append(rollout, store.Target{Kind: store.KindRollout, Name: fmt.Sprintf("r%04d-%d", i, rep)})
	}
	all := append([]store.Target{hot}, rollout...)
	url := fileURL(filepath.Join(dir, "storage"), true)
	if p.wide() {
		url = memURL("incident-" + sideName)
	}
	lat := &latencyFaults{}

	// Setup, without latency: every store resident in every shard with a sealed append, then all
	// merged so that the timed run starts from zero debt.
	o.progressf("incident %s: setup — %d shards × %d stores", sideName, p.Shards, len(all))
	sampler, err := store.OpenDB(ctx, url, storeOptions("sampler", log, noPendingCaps))
	if err != nil {
		return out, err
	}
	defer sampler.Close(context.WithoutCancel(ctx))
	if _, err := createGeneric(ctx, sampler, hot.Name); err != nil {
		return out, err
	}
	for _, t := range rollout {
		if _, err := sampler.Create(ctx, t, store.CreateOptions{}); err != nil {
			return out, err
		}
	}
	var dbs []*store.DB
	for i := 0; i < p.Shards; i++ {
		opts := storeOptions(fmt.Sprintf("%s-shard-%02d", sideName, i), log)
		opts.MergeMaxGenerations = p.MaxGens
		if isWK {
			opts.Budget = store.NewBudget(worker.DefaultConfig().MergeBudgetBytes)
		}
		db, err := openLatencyDB(ctx, url, lat, opts)
		if err != nil {
			return out, err
		}
		dbs = append(dbs, db)
	}
	defer func() {
		lat.d.Store(0)
		for _, db := range dbs {
			_ = db.Close(context.WithoutCancel(ctx))
		}
	}()
	err = eachN(len(dbs), len(dbs), func(i int) error {
		for j, t := range all {
			s, err := dbs[i].Open(ctx, t)
			if err != nil {
				return err
			}
			row := rolloutRow(fmt.Sprintf("warm-%02d-%d", i, j), 0)
			if t.Kind == store.KindGeneric {
				row = genericRow(row.Key, 0, nil)
			}
			if err := sealRows(ctx, s, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("warm-up: %w", err)
	}
	var done atomic.Int64
	err = eachN(4, len(all), func(j int) error {
		s, err := sampler.Open(ctx, all[j])
		if err != nil {
			return err
		}
		_, err = s.MergeAll(ctx)
		if n := done.Add(1); n%100 == 0 {
			o.progressf("incident %s: setup: merged %d/%d stores", sideName, n, len(all))
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("warm-up merge: %w", err)
	}

	lat.d.Store(int64(p.Latency))
	lat.requests.Store(0)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var stopSystem func()
	var cycleMu sync.Mutex
	if isWK {
		// Retried as a starting worker retries it: the dev server of a busy machine answers late.
		ensure := func(ctx context.Context) error {
			return temporaladmin.EnsureSweepSchedule(ctx, tenv.client, temporaladmin.SweepSchedule{Every: p.SweepEvery, Jitter: temporaladmin.DefaultScheduleJitter})
		}
		retrying := func(err error) { o.progressf("incident %s: sweep schedule: retrying: %v", sideName, err) }
		if err := temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, retrying, ensure); err != nil {
			return out, fmt.Errorf("sweep schedule: %w", err)
		}
		// Past 20 nodes only the first sharedWorkerNodes serve the shared queue, with one poller per
		// shard queue and a deadlock detector that allows for a starved CPU.
		cfg := nodeConfig{
			FlushInterval:         p.SealEvery,
			MergeAfterGenerations: p.CountTrigger,
			ParallelPrepare:       p.Parallel,
			PrepareConcurrency:    p.PrepareConcurrency,
		}
		if p.wide() {
			cfg.ShardPollers, cfg.DeadlockDetection = 1, 10*time.Second
		}
		var nodes []*node
		stopSystem = sync.OnceFunc(func() {
			_ = temporaladmin.DeleteSchedule(context.WithoutCancel(ctx), tenv.client, temporaladmin.SweepScheduleID) // the schedule and its running window
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Go(func() { n.stop(ctx) })
			}
			wg.Wait()
		})
		for i, db := range dbs {
			cfg.NoSharedWorker = p.wide() && i >= sharedWorkerNodes
			n, err := startNode(ctx, tenv.client, db, cfg, log)
			if err != nil {
				stopSystem() // the nodes that did start
				return out, err
			}
			nodes = append(nodes, n)
		}
	} else {
		var bwg sync.WaitGroup
		for _, db := range dbs {
			b := &baselineSweeper{db: db, flushEvery: p.SealEvery, cleanupEvery: p.SweepEvery, countTrigger: p.CountTrigger, timeout: p.StoreTimeout,
				onCycle: func(d time.Duration) { cycleMu.Lock(); out.cycles = append(out.cycles, d); cycleMu.Unlock() }}
			bwg.Go(func() { b.run(runCtx) })
		}
		stopSystem = sync.OnceFunc(func() { stopRun(); bwg.Wait() })
	}
	defer stopSystem()

	// Identical traffic on both sides: per shard, one-row appends to the hot and rollout stores.
	var appErrs atomic.Int64
	var twg sync.WaitGroup
	appendOne := func(s *store.Store, row store.Row) {
		if _, err := s.Append(runCtx, []store.Row{row}); err != nil && runCtx.Err() == nil {
			appErrs.Add(1)
		}
	}
	for i, db := range dbs {
		hs, _ := db.Open(ctx, hot)
		gn, rn := 0, 0
		every(runCtx, &twg, p.GenericEvery, func() {
			appendOne(hs, genericRow(fmt.Sprintf("s%02d-%07d", i, gn), int64(gn), nil))
			gn++
		})
		rng := uint64(i*7919 + 1)
		every(runCtx, &twg, p.RolloutEvery, func() {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			if s, err := db.Open(runCtx, rollout[rng%uint64(len(rollout))]); err == nil {
				appendOne(s, rolloutRow(fmt.Sprintf("s%02d-%07d", i, rn), int64(rn)))
			}
			rn++
		})
	}

	// Sample the hot store's pending generations per shard every second.
	shardIndex := map[string]int{}
	for i, db := range dbs {
		shardIndex[db.Shard()] = i
	}
	hs, err := sampler.Open(ctx, hot)
	if err != nil {
		return out, err
	}
	sampleNow := func() []int {
		pend := make([]int, p.Shards)
		shards, err := hs.PendingShards(ctx)
		if err != nil {
			return pend
		}
		for _, sh := range shards {
			if i, ok := shardIndex[sh.Shard]; ok {
				pend[i] = sh.PendingGenerations
			}
		}
		return pend
	}
	start := time.Now()
	tk := time.NewTicker(time.Second)
	lastReport := time.Now()
	for time.Since(start) < p.Duration {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-tk.C:
		}
		out.samples = append(out.samples, sample{T: time.Since(start).Seconds(), Pending: sampleNow()})
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			last := out.samples[len(out.samples)-1]
			extra := ""
			if !isWK {
				cycleMu.Lock()
				cs := summarize(out.cycles)
				cycleMu.Unlock()
				extra = fmt.Sprintf("  (cleanup cycles done %d, p50 %s)", cs.N, fmtDur(cs.P50))
			}
			o.progressf("incident %s: t=%3.0fs  max pending per shard %4d%s", sideName, last.T, slices.Max(last.Pending), extra)
		}
	}
	tk.Stop()
	out.requests = lat.requests.Load()
	stopRun()
	twg.Wait()
	o.progressf("incident %s: stopping", sideName)
	stopSystem()
	lat.d.Store(0)
	if isWK {
		// Every workflow of the run (the namespace is the side's own), from its history.
		if out.bill, err = countTemporalBill(ctx, tenv.client, ""); err != nil {
			return out, err
		}
		tot := out.bill.total()
		o.progressf("incident %s: %d workflow runs, %d Temporal actions, %d generations merged: %.3f actions per generation",
			sideName, tot.Runs, tot.Actions, out.bill.reclaimed, out.bill.perGeneration())
	}
	out.appErrs = appErrs.Load()
	for _, t := range rollout {
		if s, err := sampler.Open(ctx, t); err == nil {
			shards, _ := s.PendingShards(ctx)
			for _, sh := range shards {
				out.rollMax = max(out.rollMax, sh.PendingGenerations)
			}
		}
	}
	return out, nil
}

// secondHalfMean is the mean of the max pending per shard over the second half of the samples.
func secondHalfMean(ss []sample) float64 {
	h := ss[len(ss)/2:] // never empty: a side has at least one sample
	sum := 0.0
	for _, s := range h {
		sum += float64(slices.Max(s.Pending))
	}
	return sum / float64(len(h))
}

// secondHalfSlope is the least-squares slope per minute of the second half's max pending.
func secondHalfSlope(ss []sample) float64 {
	if len(ss) < 4 {
		return 0
	}
	h := ss[len(ss)/2:]
	var sx, sy, sxx, sxy float64
	for _, s := range h {
		x, y := s.T/60, float64(slices.Max(s.Pending))
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	n := float64(len(h))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func writeIncidentFiles(dir string, rep int, p incidentParams, run incidentRun) ([]string, error) {
	name := fmt.Sprintf("incident-rep%d", rep+1)
	csvPath := filepath.Join(dir, name+".csv")
	var rows [][]any
	for _, x := range []struct {
		sys string
		ss  []sample
	}{{sideWalkeeper, run.wk.samples}, {sideBaseline, run.base.samples}} {
		for _, s := range x.ss {
			for i, v := range s.Pending {
				rows = append(rows, []any{fmt.Sprintf("%.1f", s.T), x.sys, i, v})
			}
		}
	}
	if err := writeCSV(csvPath, []string{"t_seconds", "system", "shard", "pending"}, rows); err != nil {
		return nil, err
	}
	var lines []series
	add := func(ss []sample, sys string, strong, light color.Color) {
		var xs, maxes []float64
		perShard := make([][]float64, p.Shards)
		for _, s := range ss {
			xs = append(xs, s.T)
			maxes = append(maxes, float64(slices.Max(s.Pending)))
			for shard := range perShard {
				perShard[shard] = append(perShard[shard], float64(s.Pending[shard]))
			}
		}
		for _, ys := range perShard {
			lines = append(lines, series{Name: sys, X: xs, Y: ys, Color: light, Thin: true, NoLegend: true})
		}
		lines = append(lines, series{Name: sys + ": max over shards", X: xs, Y: maxes, Color: strong})
	}
	add(run.base.samples, baselineLabel, colBaseline, colBaselineLight)
	add(run.wk.samples, "walkeeper", colWalkeeper, colWalkeeperLight)
	pngPath := filepath.Join(dir, name+".png")
	title := fmt.Sprintf("Hot generic store: pending generations per shard (%d shards, %d rollout stores, %s/request)", p.Shards, p.Rollout, p.Latency)
	err := savePlot(pngPath, title, "seconds", "pending generations", lines,
		[]hline{{Name: fmt.Sprintf("count trigger %d", p.CountTrigger), Y: float64(p.CountTrigger), Color: colRef}, {Name: fmt.Sprintf("target ≤ %d", 2*p.CountTrigger), Y: float64(2 * p.CountTrigger), Color: colRef2}},
		22*vg.Centimeter, 13*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return []string{csvPath, pngPath}, nil
}

// baselineSweeper is the old design per worker (seed PR 256): a flush loop with the count trigger
// for non-generic kinds, and a cleanup sweeper walking kinds serially, one merge pass per resident
// store under a per-store timeout, merges in-process on the own shard.
type baselineSweeper struct {
	db                       *store.DB
	flushEvery, cleanupEvery time.Duration
	countTrigger             int
	timeout                  time.Duration
	onCycle                  func(time.Duration)
}

func (b *baselineSweeper) run(ctx context.Context) {
	var wg sync.WaitGroup
	every(ctx, &wg, b.flushEvery, func() {
		b.eachResident(ctx, func(ctx context.Context, s *store.Store) {
			res, err := s.Flush(ctx)
			if err == nil && s.Target().Kind != store.KindGeneric && b.countTrigger > 0 && res.Pending >= b.countTrigger {
				_, _ = s.MergeOnce(ctx, "")
			}
		})
	})
	every(ctx, &wg, b.cleanupEvery, func() {
		start := time.Now()
		b.eachResident(ctx, func(ctx context.Context, s *store.Store) {
			if _, err := s.Flush(ctx); err == nil {
				_, _ = s.MergeOnce(ctx, "")
			}
		})
		if ctx.Err() == nil {
			b.onCycle(time.Since(start))
		}
	})
	wg.Wait()
}

// eachResident runs f on every resident store, kinds serially, under the per-store timeout.
func (b *baselineSweeper) eachResident(ctx context.Context, f func(ctx context.Context, s *store.Store)) {
	for _, k := range []store.Kind{store.KindRollout, store.KindDatagen, store.KindGeneric} {
		for _, s := range b.db.Resident() {
			if s.Target().Kind != k {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			c, cancel := context.WithTimeout(ctx, b.timeout)
			f(c, s)
			cancel()
		}
	}
}
