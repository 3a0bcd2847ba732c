package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// fleetKey is one cell of the report: a variant at a size, at 1 % or the smallest fleet's debt.
type fleetKey struct {
	side   fleetVariant
	stores int
	fixed  bool
}

func (k fleetKey) valuePrefix() string {
	return fmt.Sprintf("%s_%d_%s", k.side.valueName(), k.stores, map[bool]string{true: "fixed_"}[k.fixed])
}

// fleetReport fills res from the samples: a table per variant, values, targets and plots.
func fleetReport(res *Result, o Options, sizes []int, samples []fleetSample) {
	aggs := map[fleetKey]*fleetAgg{}
	keys := map[fleetVariant][]fleetKey{} // each variant's cells, in the order measured
	var sides []fleetVariant              // in the order measured
	for _, s := range samples {
		if !slices.Contains(sides, s.Variant) {
			sides = append(sides, s.Variant)
		}
		k := fleetKey{s.Variant, s.Stores, s.FixedDebt}
		a := aggs[k]
		if a == nil {
			a = &fleetAgg{}
			aggs[k] = a
			keys[s.Variant] = append(keys[s.Variant], k)
		}
		a.samples = append(a.samples, s)
	}
	for _, a := range aggs {
		a.finish()
	}
	lo, hi := sizes[0], sizes[len(sizes)-1]
	for _, d := range sides {
		t := Table{
			Title: fmt.Sprintf("Design %q: one sweep per fleet, median over repetitions", d.name()),
			Header: []string{"stores", "in debt", "outcome", "sweep", "storage requests", "by operation", "largest event (B)",
				"largest heartbeat (B)", "history events", "pages / start batches (mean batch, launch gap)", "allocated in discovery (MiB)", "RSS growth (MiB)", "MergeWal started", "starts/s", "time-to-merge (max)",
				"Temporal actions: sweep + starts (per 1,000 stores; $ at list price)"},
		}
		for _, k := range keys[d] {
			a := aggs[k]
			key := k.valuePrefix()
			debt := fmt.Sprintf("%d (1%%)", a.debt)
			if k.fixed {
				debt = fmt.Sprintf("%d (as at %d)", a.debt, sizes[0])
			}
			outcome := "finished"
			if a.failed != "" {
				outcome = a.failed
			}
			res.values(key+"%s", map[string]float64{"failed": b2f(a.failed != ""), "sweep_s": a.dur.Median, "requests": a.req.Median,
				"largest_event_bytes": a.ev.Median, "largest_heartbeat_bytes": a.hb, "history_events": a.events.Median,
				"rss_growth_mib": a.rss.Median, "discovery_alloc_mib": a.alloc.Median, "debt": float64(a.debt),
				"pages": float64(a.last.pages), "start_batches": float64(a.last.batches), "start_rate": a.last.startRate(),
				"launch_gap_s": a.last.launchGap.Seconds(), "actions": float64(a.last.actions), "started": float64(a.started),
				"largest_payload_bytes": a.payload})
			ttm := "-"
			if a.started > 0 {
				res.Values[key+"ttm_s"] = a.ttm.Median
				ttm = a.ttm.fmt("%.1f") + " s"
			}
			t.Rows = append(t.Rows, []string{fmt.Sprint(k.stores), debt, outcome, a.dur.fmt("%.1f") + " s", a.req.fmt("%.0f"),
				fmtOps(a.byOp), a.ev.fmt("%.0f"), fmt.Sprintf("%.0f", a.hb), a.events.fmt("%.0f"),
				fmt.Sprintf("%d / %d (%s, %s)", a.last.pages, a.last.batches, fmtDur(a.last.batchTime), fmtDur(a.last.launchGap)), a.alloc.fmt("%.1f"), a.rss.fmt("%.1f"),
				fmt.Sprintf("%d/%d", a.started, a.debt), fmt.Sprintf("%.1f", a.last.startRate()), ttm,
				fmt.Sprintf("%d (%.2f; $%.4f)", a.last.actions, 1000*float64(a.last.actions)/float64(k.stores),
					float64(a.last.actions)*actioncount.ListPriceUSDPerMillion/1e6)})
		}
		res.Tables = append(res.Tables, t)
		if aggs[fleetKey{d, lo, false}] == nil {
			continue
		}
		name, historyBound := d.name(), contract.SweepHistoryBound(3, contract.DefaultSweepMaxStarts, d.batch())
		// judge records a target over every cell of the variant: what f measured in each, met where
		// f says so in all.
		judge := func(target, goal string, f func(a *fleetAgg) (string, bool)) {
			var parts []string
			met := true
			for _, k := range keys[d] {
				label := fmt.Sprint(k.stores)
				if k.fixed {
					label += " (same debt)"
				}
				measured, ok := f(aggs[k])
				parts = append(parts, label+": "+measured)
				met = met && ok
			}
			res.target(name+": "+target, goal, strings.Join(parts, "; "), met)
		}
		judge("every sweep finishes", "no failed sweep at any size", func(a *fleetAgg) (string, bool) {
			return cmp.Or(a.failed, "finished"), a.failed == ""
		})
		if a := aggs[fleetKey{d, hi, false}]; a.failed == "" {
			res.target(name+": sweep within its interval", fmt.Sprintf("≤ %s at %d stores", fleetInterval, hi), fmt.Sprintf("%.1f s", a.dur.Median), a.dur.Median <= fleetInterval.Seconds())
		}
		judge("requests per sweep", "≤ 2 × stores in debt + 100", func(a *fleetAgg) (string, bool) {
			if a.failed != "" {
				return "failed", false
			}
			return fmt.Sprintf("%.0f (bound %d)", a.req.Median, 2*a.debt+100), a.req.Median <= float64(2*a.debt+100)
		})
		a0, a1 := aggs[fleetKey{d, lo, false}], aggs[fleetKey{d, hi, true}]
		if a1 != nil {
			if a0.failed == "" && a1.failed == "" && a0.req.Median > 0 {
				r := a1.req.Median / a0.req.Median
				res.target(name+": requests ratio at the same debt", fmt.Sprintf("≤ 1.5 from %d to %d stores, %d in debt", lo, hi, a0.debt), fmt.Sprintf("%.2f", r), r <= 1.5)
				g := (a1.alloc.Median + 1) / (a0.alloc.Median + 1)
				res.target(name+": worker memory for discovery", fmt.Sprintf("flat: (bytes allocated in discovery + 1 MiB) ratio ≤ 1.3 from %d to %d stores at the same debt", lo, hi),
					fmt.Sprintf("%.1f → %.1f MiB (%.2f)", a0.alloc.Median, a1.alloc.Median, g), g <= 1.3)
				res.values(d.valueName()+"_%s", map[string]float64{"requests_ratio": r, "alloc_ratio": g, "rss_ratio": (a1.rss.Median + 1) / (a0.rss.Median + 1)})
			} else {
				res.target(name+": requests ratio at the same debt", fmt.Sprintf("≤ 1.5 from %d to %d stores", lo, hi), "a sweep failed", false)
			}
		}
		judge("largest payload", "≤ 256 KiB (largest history event; heartbeat details)", func(a *fleetAgg) (string, bool) {
			measured := fmt.Sprintf("%.0f KiB, %.0f KiB", a.ev.Median/1024, a.hb/1024)
			if a.payload > 0 {
				measured += fmt.Sprintf("; SDK warned of a %.0f KiB payload", a.payload/1024)
			}
			return measured, a.failed == "" && a.ev.Median <= 256<<10 && a.hb <= 256<<10 && a.payload <= 256<<10
		})
		// A failed sweep's history is not judged: the target above reports the failure.
		judge("sweep history", fmt.Sprintf("≤ 10,000 events (and ≤ %d, the paged sweep's bound)", historyBound), func(a *fleetAgg) (string, bool) {
			return fmt.Sprintf("%.0f", a.events.Median), a.failed != "" || a.events.Median <= 10_000 && a.events.Median <= float64(historyBound)
		})
		judge("time-to-merge", fmt.Sprintf("every indebted store's MergeWal started ≤ %s after its debt was planted or the sweep started", fleetInterval), func(a *fleetAgg) (string, bool) {
			ok := a.failed == "" && a.ttm.Median <= fleetInterval.Seconds() && a.started == a.debt
			if a.started == 0 {
				return fmt.Sprintf("0/%d started", a.debt), ok
			}
			return fmt.Sprintf("%.1f s, %d/%d started", a.ttm.Median, a.started, a.debt), ok
		})
	}
	res.note("Workers: %d in-process walkeeper instances (own instance ID, store handle, shard queue; shared-queue workflow and activity workers) against one Temporal dev server; mem:// is per process, so worker child processes would need a storage server shared between processes. RSS is the bench process's (workers, the mem:// fleet, the client): the table reports its growth during the sweep (VmHWM after the sweep, reset through /proc/self/clear_refs at its start, minus VmRSS at its start). A worker's memory for discovery is bounded from above by the bytes the whole process allocated from the sweep's start to the end of discovery (runtime/metrics /gc/heap/allocs:bytes, sampled every 50 ms): RSS growth at 1M stores measures the GC's pacing over the fleet's own heap, not a worker.", fleetWorkers)
	res.note("Storage requests: every request of the 8 workers from the sweep's start until its first StartWorkflows started (or its discovery activity closed), and after that the listings of the demand index (the later ScanDemand pages of the paged sweep); the MergeWal runs the sweep starts are not counted, nor requests for an earlier fleet's stores (activities of its terminated MergeWal runs that still reach this fleet's workers; counted apart in the progress log). A listing of the registry or of the demand index counts (and sleeps) one request per 1000 keys, as an object store pages it.")
	res.note("Starts/s: MergeWal runs started over the span from the sweep's first StartWorkflows start to its last one's close (from the sweep's history); the mean batch is a StartWorkflows activity's start-to-close time (a variant's batch, its starts in flight at a time; by default %d starts, %d at a time).", contract.DefaultSweepStartBatch, activities.DefaultStartConcurrency)
	res.note("Time-to-merge: from the later of a store's planting and the sweep's start (planting 10,000 stores' debt takes minutes at 1M stores, and the sweep starts when planting ends: the best phase) to its MergeWal's start; with a schedule every interval add up to one interval. The old debt was sealed an hour ago (past MaxPendingAge) at planting, so it has crossed its threshold at the planting time.")
	res.note("The fleet is registered without latency by writing the registry entry and store.json of each store directly (the bytes DB.Create writes for a template store); the debt goes through the seal path of two writers closed afterwards. Starts go in the sweep's default batches of 256 (StartBatch), at most 10,000 per sweep (MaxStarts), one batch a second from the first launch (planned pacing), each batch 32 starts at a time, 4 batches in flight (Concurrency), unless a variant (--variants concurrency/batch) says otherwise.")

	if o.OutDir == "" {
		return
	}
	// plotOne plots val per variant; all adds the same-debt curves and the failed sweeps.
	plotOne := func(file, title, ylabel string, all, logY bool, val func(a *fleetAgg) float64) {
		var lines []series
		for i, d := range sides {
			for _, fixed := range []bool{false, true} {
				if fixed && !all {
					continue
				}
				name := d.name() + ", 1% in debt"
				if fixed {
					name = fmt.Sprintf("%s, %d in debt", d.name(), debtOf(lo))
				}
				s := series{Name: name, Color: sideColor(d, i), Dashed: fixed, Points: true, LogY: logY}
				for _, n := range sizes {
					k := fleetKey{d, n, fixed && n != lo}
					a := aggs[k]
					if a == nil || a.failed != "" && !all {
						continue
					}
					s.X = append(s.X, float64(n))
					s.Y = append(s.Y, max(val(a), 1e-3))
				}
				if len(s.X) > 0 {
					lines = append(lines, s)
				}
			}
		}
		p := filepath.Join(o.OutDir, file)
		if err := savePlot(p, title, "registered stores", ylabel, lines, nil, 520, 340); err == nil {
			res.Files = append(res.Files, p)
		}
	}
	plotOne("fleet-sweep-duration.png", "Sweep duration (failed sweeps: until stopped)", "seconds", true, false, func(a *fleetAgg) float64 { return a.dur.Median })
	plotOne("fleet-requests.png", "Storage requests per sweep (failed sweeps: until stopped)", "requests (log)", true, true, func(a *fleetAgg) float64 { return a.req.Median })
	plotOne("fleet-rss.png", "Bench process RSS growth during the sweep (8 workers and the fleet)", "MiB", true, false, func(a *fleetAgg) float64 { return a.rss.Median })
	plotOne("fleet-discovery-alloc.png", "Bytes allocated during discovery (bounds a worker's discovery memory)", "MiB (log)", true, true, func(a *fleetAgg) float64 { return a.alloc.Median })
	plotOne("fleet-time-to-merge.png", "Debt planted to MergeWal start (max; finished sweeps)", "seconds", false, false, func(a *fleetAgg) float64 { return a.ttm.Median })
	var rows [][]any
	for _, s := range samples {
		rows = append(rows, []any{s.Variant.String(), s.Stores, s.Debt, s.FixedDebt, strings.ReplaceAll(s.Failed, ",", ";"), s.Duration.Seconds(), s.Requests, s.largest, s.LargestHeartbeat, s.events, mib(s.RSS.growth()), s.Started, s.TTM.Seconds(), s.LargestPayload, mib(s.DiscoveryAlloc)})
	}
	p := filepath.Join(o.OutDir, "fleet.csv")
	if err := writeCSV(p, []string{"variant", "stores", "debt", "fixed_debt", "failed", "sweep_s", "requests", "largest_event_bytes", "largest_heartbeat_bytes", "history_events", "rss_growth_mib", "started", "ttm_s", "largest_payload_bytes", "discovery_alloc_mib"}, rows); err == nil {
		res.Files = append(res.Files, p)
	}
}

// sideColor is blue for the default variant, sidePalette's next colour for each other.
func sideColor(d fleetVariant, i int) color.Color {
	if d.isDefault() {
		return colWalkeeper
	}
	return sidePalette[i%len(sidePalette)]
}

var sidePalette = []color.Color{
	colBaseline, colWalkeeper,
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

func fmtOps(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// fleetAgg is one variant at one fleet size and debt over its repetitions.
type fleetAgg struct {
	samples                        []fleetSample
	failed                         string
	dur, req, ev, events, rss, ttm spread
	alloc                          spread
	hb, payload                    float64
	started, debt                  int
	byOp                           map[string]int64
	last                           fleetSample // the last repetition, for its pages and start rate
}

// finish computes the medians; a failure of any repetition is the cell's outcome.
func (a *fleetAgg) finish() {
	for _, s := range a.samples {
		a.debt = s.Debt
		if s.Failed != "" {
			a.failed = s.Failed
		}
		a.hb = max(a.hb, float64(s.LargestHeartbeat))
		a.payload = max(a.payload, float64(s.LargestPayload))
		a.started = s.Started
		a.byOp = s.ByOp
		a.last = s
	}
	a.dur = spreadBy(a.samples, func(s fleetSample) float64 { return s.Duration.Seconds() })
	a.req = spreadBy(a.samples, func(s fleetSample) float64 { return float64(s.Requests) })
	a.ev = spreadBy(a.samples, func(s fleetSample) float64 { return float64(s.largest) })
	a.events = spreadBy(a.samples, func(s fleetSample) float64 { return float64(s.events) })
	a.rss = spreadBy(a.samples, func(s fleetSample) float64 { return mib(s.RSS.growth()) })
	a.alloc = spreadBy(a.samples, func(s fleetSample) float64 { return mib(s.DiscoveryAlloc) })
	a.ttm = spreadBy(a.samples, func(s fleetSample) float64 { return s.TTM.Seconds() })
}
