package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The fleet-worker scenario (docs/benchmarks/fleet.md): one worker child process's peak RSS during
// a sweep and a reconcile, flat in the registered stores of a file:// fleet at the same debt.

// fleetWorkerDebt is the stores in debt at every fleet size (fleetWorkerQuickDebt with --quick).
const (
	fleetWorkerDebt      = 100
	fleetWorkerQuickDebt = 20
)

// fleetWorkerSample is one fleet size's measurement.
type fleetWorkerSample struct {
	Stores, Debt                    int
	Register, Plant                 time.Duration
	SweepDur                        time.Duration
	SweepFailed                     string
	Started                         int
	ReconcileDur                    time.Duration
	ReconcileDone                   bool
	ReconcilePages, ReconcileStores int
	SweepRSS, ReconcileRSS          rssSpan // the worker's RSS over each phase
}

// fleetWorkerPhase is one measured phase of a sample: key names its report values, target
// and legend its target and plot line.
type fleetWorkerPhase struct {
	key, target, legend string
	rss                 rssSpan
}

func (s fleetWorkerSample) phases() []fleetWorkerPhase {
	return []fleetWorkerPhase{{"sweep", "a sweep and its merges", "sweep + its merges", s.SweepRSS}, {"reconcile", "a reconcile", "reconcile", s.ReconcileRSS}}
}

func runFleetWorker(ctx context.Context, o Options, res *Result, dir string) error {
	sizes, err := fleetSizes(o, "fleet-worker", []int{10_000, 1_000_000}, fleetWorkerDebt)
	if err != nil {
		return err
	}
	// The reconcile is measured over its first budget (1M stores on file:// take longer); the merges'
	// wait is a cap, not a target.
	reconcileBudget, debt := fullOrQuick(o, 3*time.Minute, 30*time.Second), fullOrQuick(o, fleetWorkerDebt, fleetWorkerQuickDebt)
	const sweepBudget = 5 * time.Minute
	res.params("sizes", sizes,
		"debt", fmt.Sprintf("%d stores at every size (half 2 generations sealed 1h ago, half 10 fresh)", debt),
		"storage", "file:// (nosync), fleet written by the bench",
		"worker", "one child process, worker.New + Start with the default configuration (sweep and reconcile schedules and the fairness probe off)",
		"reconcile_budget", reconcileBudget)

	tenv, err := startTemporal(ctx, o, o.OutDir, devserver.Options{})
	if err != nil {
		return err
	}
	defer tenv.close()

	var samples []fleetWorkerSample
	for i, n := range sizes {
		s, err := runFleetWorkerOnce(ctx, o, tenv, filepath.Join(dir, fmt.Sprintf("fleet-%d", n)), i, n, debt, sweepBudget, reconcileBudget)
		if err != nil {
			return fmt.Errorf("fleet-worker %d stores: %w", n, err)
		}
		o.progressf("fleet-worker: %d stores: sweep %s, %d started, worker RSS +%.1f MiB (from %.1f); reconcile %s (%d pages, finished %v), +%.1f MiB",
			n, fmtDur(s.SweepDur), s.Started, mib(s.SweepRSS.growth()), mib(s.SweepRSS.Before), fmtDur(s.ReconcileDur), s.ReconcilePages, s.ReconcileDone, mib(s.ReconcileRSS.growth()))
		samples = append(samples, s)
	}
	fleetWorkerReport(res, o, samples)
	return nil
}

func runFleetWorkerOnce(ctx context.Context, o Options, tenv *temporalEnv, root string, seq, n, debt int, sweepBudget, reconcileBudget time.Duration) (fleetWorkerSample, error) {
	s := fleetWorkerSample{Stores: n}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return s, err
	}
	defer func() {
		t0 := time.Now()
		_ = os.RemoveAll(root)
		o.progressf("fleet-worker: removed the %d-store fleet in %s", n, fmtDur(time.Since(t0)))
	}()
	url := fileURL(root, true)
	b, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return s, err
	}
	prefix := fmt.Sprintf("w%d-", seq)
	t0 := time.Now()
	err = registerFleet(ctx, b, prefix, n)
	_ = b.Close()
	if err != nil {
		return s, fmt.Errorf("register: %w", err)
	}
	s.Register = time.Since(t0)
	o.progressf("fleet-worker: registered %d stores on file:// in %s", n, fmtDur(s.Register))
	t0 = time.Now()
	planted, _, err := plantDebt(ctx, url, prefix, n, debt, o)
	if err != nil {
		return s, fmt.Errorf("plant debt: %w", err)
	}
	s.Debt, s.Plant = len(planted), time.Since(t0)
	o.progressf("fleet-worker: planted debt in %d stores in %s; starting the worker", s.Debt, fmtDur(s.Plant))

	// The default configuration with the schedules off, and the fairness probe: its starts on
	// the shared server would load what the benchmark measures.
	child, err := startWorkerChild(ctx, o, "fleet-worker", workerChildParams{URL: url, Instance: fmt.Sprintf("fleet-worker-%d", seq), Knobs: map[string]string{
		"temporal": tenv.hostPort, "sweep-interval": "0", "reconcile-interval": "0", "fairness-probe": "false",
	}})
	if err != nil {
		return s, err
	}
	defer child.stop()
	time.Sleep(2 * time.Second) // let the worker's pollers and start-up reads settle

	// The sweep, and the merges it starts (they run in this worker).
	s.SweepRSS.Before = child.resetPeak()
	start := time.Now()
	sweepID := fmt.Sprintf("fleet-worker-sweep-%d-%d", time.Now().UnixNano(), seq)
	run, err := tenv.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sweepID, TaskQueue: contract.TaskQueue, Priority: contract.SweepPriority},
		contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{MergeMinGenerations: fleetMergeMin, MaxPendingAge: fleetMaxAge})
	if err != nil {
		return s, err
	}
	sctx, cancel := context.WithTimeout(ctx, sweepBudget)
	var out contract.MaintenanceSweepResult
	err = run.Get(sctx, &out)
	cancel()
	s.SweepDur = time.Since(start)
	switch {
	case err != nil:
		s.SweepFailed = firstLine(err.Error())
		_ = tenv.client.TerminateWorkflow(context.WithoutCancel(ctx), sweepID, run.GetRunID(), "fleet-worker bench: "+s.SweepFailed)
	case len(out.ScanErrors) > 0:
		s.SweepFailed = "scan error " + firstLine(out.ScanErrors[0])
	}
	// Wait for the merges the sweep started to close: their memory is the sweep's too.
	s.Started = waitMerges(ctx, tenv.client, planted, sweepBudget)
	s.SweepRSS.Peak = child.peak()
	o.progressf("fleet-worker: sweep %s, %d of %d MergeWal runs closed after %s", fmtDur(s.SweepDur), s.Started, s.Debt, fmtDur(time.Since(start)))

	s.ReconcileRSS.Before = child.resetPeak()
	start = time.Now()
	recID := fmt.Sprintf("fleet-worker-reconcile-%d-%d", time.Now().UnixNano(), seq)
	_, err = tenv.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: recID, TaskQueue: contract.TaskQueue, Priority: contract.SweepPriority},
		contract.ReconcileDemandWorkflow, contract.ReconcileDemandInput{})
	if err != nil {
		return s, err
	}
	rctx, cancel := context.WithTimeout(ctx, reconcileBudget)
	var rout contract.ReconcileDemandResult
	// GetWorkflow with no run ID follows the continue-as-new chain to its last run.
	err = tenv.client.GetWorkflow(rctx, recID, "").Get(rctx, &rout)
	cancel()
	s.ReconcileDur = time.Since(start)
	s.ReconcileRSS.Peak = child.peak()
	if err == nil {
		s.ReconcileDone, s.ReconcilePages, s.ReconcileStores = true, rout.Totals.Pages, rout.Totals.Stores
	} else {
		// Not finished within the budget: its progress is in the current run's input.
		s.ReconcilePages, s.ReconcileStores = reconcileProgress(ctx, tenv.client, recID)
		_ = tenv.client.TerminateWorkflow(context.WithoutCancel(ctx), recID, "", "fleet-worker bench: reconcile budget over")
	}
	t0 = time.Now()
	child.stop()
	o.progressf("fleet-worker: reconcile %s; worker stopped in %s", fmtDur(s.ReconcileDur), fmtDur(time.Since(t0)))
	return s, nil
}

// waitMerges waits (up to budget) for the MergeWal run of every planted target to close and
// returns how many ran.
func waitMerges(ctx context.Context, c client.Client, planted map[store.Target]time.Time, budget time.Duration) int {
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var ran atomic.Int64
	targets := slices.Collect(maps.Keys(planted))
	_ = eachN(16, len(targets), func(i int) error {
		// The sweep may still be starting it: retry "not found" until the budget.
		for wctx.Err() == nil {
			err := c.GetWorkflow(wctx, contract.MergeWalID(targets[i]), "").Get(wctx, nil)
			if !errors.As(err, new(*serviceerror.NotFound)) {
				if err == nil {
					ran.Add(1)
				}
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
	return int(ran.Load())
}

// reconcileProgress reads the totals a running reconcile carries in its current run's input.
func reconcileProgress(ctx context.Context, c client.Client, id string) (pages, stores int) {
	it := c.GetWorkflowHistory(ctx, id, "", false, 0)
	if !it.HasNext() {
		return 0, 0
	}
	ev, _ := it.Next() // nil on an error, and a nil event's getters return nothing
	ps := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	var in contract.ReconcileDemandInput
	if len(ps) == 0 || converter.GetDefaultDataConverter().FromPayload(ps[0], &in) != nil {
		return 0, 0
	}
	return in.Totals.Pages, in.Totals.Stores
}

func fleetWorkerReport(res *Result, o Options, samples []fleetWorkerSample) {
	t := Table{
		Title: "One worker process (child), the same debt at every fleet size",
		Header: []string{"stores", "in debt", "register / plant", "sweep", "MergeWal ran", "worker RSS before (MiB)",
			"peak RSS, sweep + its merges (MiB)", "growth", "reconcile", "reconcile pages / stores", "peak RSS, reconcile (MiB)", "growth"},
	}
	for _, s := range samples {
		sweep := fmtDur(s.SweepDur)
		if s.SweepFailed != "" {
			sweep += " (failed: " + s.SweepFailed + ")"
		}
		rec := fmtDur(s.ReconcileDur)
		if !s.ReconcileDone {
			rec += " (budget; not finished)"
		}
		t.Rows = append(t.Rows, []string{
			fmt.Sprint(s.Stores), fmt.Sprint(s.Debt), fmtDur(s.Register) + " / " + fmtDur(s.Plant), sweep,
			fmt.Sprintf("%d/%d", s.Started, s.Debt), fmt.Sprintf("%.1f", mib(s.SweepRSS.Before)),
			fmt.Sprintf("%.1f", mib(s.SweepRSS.Peak)), fmt.Sprintf("%.1f", mib(s.SweepRSS.growth())), rec,
			fmt.Sprintf("%d / %d", s.ReconcilePages, s.ReconcileStores),
			fmt.Sprintf("%.1f", mib(s.ReconcileRSS.Peak)), fmt.Sprintf("%.1f", mib(s.ReconcileRSS.growth())),
		})
		res.values("%s_"+strconv.Itoa(s.Stores), map[string]float64{"sweep_peak_mib": mib(s.SweepRSS.Peak), "sweep_growth_mib": mib(s.SweepRSS.growth()),
			"reconcile_peak_mib": mib(s.ReconcileRSS.Peak), "reconcile_growth_mib": mib(s.ReconcileRSS.growth()), "started": float64(s.Started),
			"debt": float64(s.Debt), "reconcile_pages": float64(s.ReconcilePages), "reconcile_stores": float64(s.ReconcileStores)})
	}
	res.Tables = append(res.Tables, t)
	if len(samples) < 2 {
		return
	}
	lo, hi := samples[0], samples[len(samples)-1]
	// The target is the peak RSS; the growth, noise-sized at the reconcile, is reported beside it.
	var lines []series
	for i, ph := range lo.phases() {
		a, b := ph.rss, hi.phases()[i].rss
		r := float64(b.Peak) / float64(max(a.Peak, 1))
		res.Values[ph.key+"_peak_ratio"] = r
		res.target(fmt.Sprintf("worker peak RSS during %s, %d → %d stores", ph.target, lo.Stores, hi.Stores), "≤ 1.3",
			fmt.Sprintf("%.2f (%.1f → %.1f MiB; growth %.1f → %.1f MiB)", r, mib(a.Peak), mib(b.Peak), mib(a.growth()), mib(b.growth())), r <= 1.3)
		l := series{Name: ph.legend, Points: true}
		for _, s := range samples {
			l.X = append(l.X, float64(s.Stores))
			l.Y = append(l.Y, mib(s.phases()[i].rss.Peak))
		}
		lines = append(lines, l)
	}
	p := filepath.Join(o.OutDir, "fleet-worker-rss.png")
	if err := savePlot(p, "One worker's peak RSS (same debt)", "registered stores", "MiB", lines, nil, 520, 340); err == nil {
		res.Files = append(res.Files, p)
	}
}
