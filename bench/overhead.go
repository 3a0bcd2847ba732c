package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
	"github.com/walkeeper/walkeeper/workflows"
)

// RunTemporalOverhead measures what running merges as Temporal workflows costs: 1 MiB merges
// (one generation each) through MergeWal on a real dev server with an in-process node, against
// the same prepare + commit called in a direct loop, alternating one of each so drift hits both
// alike; and the time one MaintenanceSweep takes over 1,000 idle stores.
func RunTemporalOverhead(ctx context.Context, o Options) (*Result, error) {
	res := newResult("temporal-overhead", o)
	merges, idle := 20, 1000
	if o.Quick {
		merges, idle = 5, 100
	}
	if o.Stores > 0 {
		idle = o.Stores
	}
	res.param("reps", o.reps())
	res.param("merges_per_rep", merges)
	res.param("merge_size", "1 MiB (one generation)")
	res.param("idle_stores", idle)
	res.param("storage", "file:// with fsync")
	dir, cleanup, err := o.workDir("overhead")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	tenv, err := startTemporal(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer tenv.close()
	url := fileURL(filepath.Join(dir, "store"), false)
	db, err := store.OpenDB(ctx, url, storeOptions("overhead", o.logger(), func(so *store.Options) {
		so.Budget = store.NewBudget(worker.DefaultConfig().MergeBudgetBytes)
	}))
	if err != nil {
		return nil, err
	}
	defer db.Close(context.WithoutCancel(ctx))
	n, err := startNode(ctx, tenv.client, db, worker.NewMetrics(db.Options().Budget), nodeConfig{
		MergeSlots: worker.DefaultConfig().MergeSlots, SharedActivitySlots: worker.DefaultConfig().SharedActivitySlots,
	}, o.logger())
	if err != nil {
		return nil, err
	}
	defer n.stop(ctx)

	viaWF, err := createGeneric(ctx, db, "via-workflow")
	if err != nil {
		return nil, err
	}
	direct, err := createGeneric(ctx, db, "direct")
	if err != nil {
		return nil, err
	}
	const payload = 4 << 10
	rows := (1 << 20) / (payload + 64)
	var wfRates, dRates, ratios, wfP50, dP50 []float64
	seq := int64(0)
	for rep := 0; rep < o.reps(); rep++ {
		var wfTotal, dTotal time.Duration
		var wfLat, dLat []time.Duration
		for i := 0; i < merges; i++ {
			for _, s := range []*store.Store{viaWF, direct} {
				seq++
				if err := writeGenerations(ctx, s, 1, rows, payload, 1<<30, seq<<20); err != nil {
					return nil, err
				}
				t0 := time.Now()
				if s == viaWF {
					run, err := workflows.StartMergeWal(ctx, tenv.client, s.Target(), workflows.MergeWalInput{})
					if err != nil {
						return nil, err
					}
					var out workflows.MergeWalResult
					if err := run.Get(ctx, &out); err != nil {
						return nil, err
					}
					if out.Reclaimed != 1 {
						return nil, fmt.Errorf("MergeWal reclaimed %d, want 1", out.Reclaimed)
					}
					d := time.Since(t0)
					wfTotal += d
					wfLat = append(wfLat, d)
				} else {
					cr, err := s.MergeOnce(ctx, "")
					if err != nil {
						return nil, err
					}
					if cr.Reclaimed != 1 {
						return nil, fmt.Errorf("direct merge reclaimed %d, want 1", cr.Reclaimed)
					}
					d := time.Since(t0)
					dTotal += d
					dLat = append(dLat, d)
				}
			}
			if st, err := viaWF.Stats(ctx); err == nil && st.Runs >= 32 {
				_, _ = viaWF.CompactBase(ctx, store.CompactParams{MaxRuns: 32})
				_, _ = direct.CompactBase(ctx, store.CompactParams{MaxRuns: 32})
			}
		}
		wr, dr := float64(merges)/wfTotal.Seconds(), float64(merges)/dTotal.Seconds()
		wfRates, dRates, ratios = append(wfRates, wr), append(dRates, dr), append(ratios, dr/wr)
		wfP50, dP50 = append(wfP50, ms(summarize(wfLat).P50)), append(dP50, ms(summarize(dLat).P50))
		o.progressf("temporal-overhead: rep %d/%d: workflow %.1f merges/s (p50 %s), direct %.1f merges/s (p50 %s)", rep+1, o.reps(), wr, fmtDur(summarize(wfLat).P50), dr, fmtDur(summarize(dLat).P50))
	}
	w, d, r := spreadOf(wfRates), spreadOf(dRates), spreadOf(ratios)
	wp, dp := spreadOf(wfP50), spreadOf(dP50)
	res.Tables = append(res.Tables, Table{
		Title:  "1 MiB merges, one at a time: median over repetitions, range in brackets",
		Header: []string{"", "MergeWal workflow", "direct prepare + commit", "direct / workflow"},
		Rows: [][]string{
			{"merges/s", w.fmt("%.1f"), d.fmt("%.1f"), r.fmt("%.2f")},
			{"p50 latency per merge (ms)", wp.fmt("%.0f"), dp.fmt("%.0f"), fmt.Sprintf("+%.0f ms", wp.Median-dp.Median)},
		},
	})
	res.Values["wf_rate"] = w.Median
	res.Values["direct_rate"] = d.Median
	res.Values["ratio"] = r.Median
	res.Values["wf_p50_ms"] = wp.Median
	res.Values["direct_p50_ms"] = dp.Median

	// Sweep over idle stores.
	o.progressf("temporal-overhead: creating %d idle stores", idle)
	var g errgroup.Group
	g.SetLimit(8)
	for i := 0; i < idle; i++ {
		g.Go(func() error {
			_, err := db.Create(ctx, store.Target{Kind: store.Kinds[i%len(store.Kinds)], Name: fmt.Sprintf("idle%05d", i)}, createOptsFor(store.Kinds[i%len(store.Kinds)]))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var sweeps []float64
	for rep := 0; rep < o.reps(); rep++ {
		t0 := time.Now()
		run, err := tenv.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("bench-sweep-%d-%d", time.Now().UnixNano(), rep), TaskQueue: workflows.TaskQueue,
		}, workflows.MaintenanceSweepWorkflow, workflows.MaintenanceSweepInput{})
		if err != nil {
			return nil, err
		}
		var out workflows.MaintenanceSweepResult
		if err := run.Get(ctx, &out); err != nil {
			return nil, err
		}
		d := time.Since(t0)
		if out.Scanned < idle {
			return nil, fmt.Errorf("sweep scanned %d stores, want ≥ %d", out.Scanned, idle)
		}
		sweeps = append(sweeps, d.Seconds())
		o.progressf("temporal-overhead: sweep %d/%d over %d stores: %s (%d started)", rep+1, o.reps(), out.Scanned, fmtDur(d), len(out.Started))
	}
	sw := spreadOf(sweeps)
	res.Tables = append(res.Tables, Table{
		Title:  "One MaintenanceSweep (scan every kind, decide, start nothing) over idle stores",
		Header: []string{"stores", "time (s)", "stores/s"},
		Rows:   [][]string{{fmt.Sprint(idle), sw.fmt("%.2f"), fmt.Sprintf("%.0f", float64(idle)/sw.Median)}},
	})
	res.Values["sweep_s"] = sw.Median
	res.note("The direct loop is the floor: the same store.Prepare/Commit without Temporal. The workflow adds a start, a ListPendingShards activity and the Prepare/Commit activities' scheduling.")
	return res, nil
}

func createOptsFor(k store.Kind) store.CreateOptions {
	if k == store.KindGeneric {
		return store.CreateOptions{Schema: &benchSchema}
	}
	return store.CreateOptions{}
}
