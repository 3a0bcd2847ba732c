package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// readAmp is the read-amp scenario (docs/benchmarks/read-amp.md): Get and List latency from a
// reader process over a 10,000-row base with pending generations on top, then merged, then
// compacted.
func readAmp(ctx context.Context, o Options, res *Result, dir string) error {
	levels := fullOrQuick(o, []int{0, 16, 256, 1024}, []int{0, 16, 256})
	gets, lists := fullOrQuick(o, 400, 100), fullOrQuick(o, 100, 20)
	const baseRows, rowsPerGen = 10000, 100
	// listAfter spreads the timed Lists over the base, a page before its end, so pages are full.
	listAfter := func(i int) string { return fmt.Sprintf("k%09d", (i*7919)%(baseRows-200)) }
	res.params("base_rows", baseRows, "rows_per_generation", rowsPerGen, "gets_per_level", gets, "lists_per_level", lists)

	type row struct{ getP50, getP99, listP50, listP99 []float64 }
	rowsBy := map[string]*row{}
	var order []string
	// add records one measurement of state label and prints it.
	add := func(label string, rd reads) {
		r := rowsBy[label]
		if r == nil {
			r = &row{}
			rowsBy[label] = r
			order = append(order, label)
		}
		r.getP50 = append(r.getP50, us(rd.get.P50))
		r.getP99 = append(r.getP99, us(rd.get.P99))
		r.listP50 = append(r.listP50, us(rd.list.P50))
		r.listP99 = append(r.listP99, us(rd.list.P99))
		o.progressf("read-amp: %s: get p50 %s p99 %s, list p50 %s p99 %s", label, fmtDur(rd.get.P50), fmtDur(rd.get.P99), fmtDur(rd.list.P50), fmtDur(rd.list.P99))
	}
	var speedups []float64
	for rep := 0; rep < o.reps(); rep++ {
		for _, pending := range levels {
			root := fmt.Sprintf("%s/r%d-p%d", dir, rep, pending)
			url := fileURL(root, true)
			w, s, err := openAs(ctx, url, "writer", o.logger(), genericTarget("ra"), noPendingCaps)
			if err != nil {
				return err
			}
			if err := writeGenerations(ctx, s, 1, baseRows, 16, baseRows, 0); err != nil {
				return err
			}
			if _, err := s.MergeAll(ctx); err != nil {
				return err
			}
			o.progressf("read-amp: rep %d/%d: writing %d pending generations", rep+1, o.reps(), pending)
			for g := 0; g < pending; g++ {
				batch := make([]store.Row, rowsPerGen)
				for i := range batch {
					k := (g*rowsPerGen + i*37) % baseRows
					batch[i] = genericRow(fmt.Sprintf("k%09d", k), int64(g), payloadOf(16, int64(g*rowsPerGen+i)))
				}
				if err := sealRows(ctx, s, batch...); err != nil {
					return err
				}
			}
			measure := func() (reads, error) {
				r, rs, err := openAs(ctx, url, "reader", o.logger(), s.Target(), noPendingCaps)
				if err != nil {
					return reads{}, err
				}
				defer r.Close(context.WithoutCancel(ctx))
				var gl, ll []time.Duration
				for i := 0; i < gets; i++ {
					t0 := time.Now()
					if _, err := rs.Get(ctx, fmt.Sprintf("k%09d", (i*7919)%baseRows)); err != nil {
						return reads{}, fmt.Errorf("get: %w", err)
					}
					gl = append(gl, time.Since(t0))
				}
				// The reads must see the pending generations: a read that skipped them would be fast and wrong.
				newest, want := "k000000042", int64(42) // a base row (n = key)
				if pending > 0 {
					g := pending - 1 // the newest generation's first row, no later write
					newest, want = fmt.Sprintf("k%09d", (g*rowsPerGen)%baseRows), int64(g)
				}
				row, err := rs.Get(ctx, newest)
				if err != nil {
					return reads{}, fmt.Errorf("get %s: %w", newest, err)
				}
				if got := fmt.Sprint(row["n"]); got != fmt.Sprint(want) {
					return reads{}, fmt.Errorf("get %s at %d pending: n = %s, want %d (the newest pending generation's value)", newest, pending, got, want)
				}
				for i := 0; i < lists; i++ {
					t0 := time.Now()
					page, err := rs.List(ctx, store.ListOptions{Limit: 100, After: listAfter(i)})
					if err != nil || len(page.Rows) != 100 {
						return reads{}, fmt.Errorf("list: %v (%d rows)", err, len(page.Rows))
					}
					ll = append(ll, time.Since(t0))
				}
				return reads{summarize(gl), summarize(ll)}, nil
			}
			rd, err := measure()
			if err != nil {
				return err
			}
			add(fmt.Sprintf("%d pending", pending), rd)
			if pending == levels[len(levels)-1] {
				// An unmerged copy, read side by side with the merged store below.
				unmerged := root + "-unmerged"
				if err := os.CopyFS(unmerged, os.DirFS(root)); err != nil {
					return err
				}
				if _, err := s.MergeAll(ctx); err != nil {
					return err
				}
				rd, err := measure()
				if err != nil {
					return err
				}
				st, _ := s.Stats(ctx)
				add(fmt.Sprintf("%d pending, after merging (%d base runs)", pending, st.Runs), rd)
				// What the sweep's CompactBase does next (≥ 32 runs): rewrite the runs into one.
				for i := 0; i < 64; i++ {
					cr, err := s.CompactBase(ctx, store.CompactParams{MaxRuns: 16})
					if err != nil {
						return err
					}
					if !cr.Committed || cr.RunsLeft <= 1 {
						break
					}
				}
				if rd, err = measure(); err != nil {
					return err
				}
				if st, err = s.Stats(ctx); err != nil {
					return err
				}
				// What the last rows measure: everything merged (read by the test).
				res.Values["pending_after_merge"] = max(res.Values["pending_after_merge"], float64(st.TotalPending()))
				add(fmt.Sprintf("%d pending, after merging and compaction (%d base run)", pending, st.Runs), rd)
				speedup, err := listSpeedupSideBySide(ctx, o, s.Target(), fileURL(unmerged, true), url, lists, listAfter)
				if err != nil {
					return err
				}
				speedups = append(speedups, speedup)
				o.progressf("read-amp: side by side: a List over %d pending takes %.1f× the merged store's", pending, speedup)
			}
			if err := w.Close(ctx); err != nil {
				return err
			}
		}
	}
	t := Table{Title: "Read latency (µs) from a reader process, median over repetitions of each percentile, range in brackets",
		Header: []string{"state", "Get p50", "Get p99", "List(100) p50", "List(100) p99", "List p50 vs 0 pending"}}
	base := spreadOf(rowsBy[order[0]].listP50).Median
	for _, label := range order {
		r := rowsBy[label]
		lp := spreadOf(r.listP50)
		t.Rows = append(t.Rows, []string{label, spreadOf(r.getP50).fmt("%.0f"), spreadOf(r.getP99).fmt("%.0f"), lp.fmt("%.0f"), spreadOf(r.listP99).fmt("%.0f"), fmt.Sprintf("%.1f×", lp.Median/base)})
		res.values("%s/"+label, map[string]float64{"list_p50_us": lp.Median, "get_p50_us": spreadOf(r.getP50).Median})
	}
	res.Tables = append(res.Tables, t)
	top := order[len(order)-3]
	after := order[len(order)-1]
	sp := spreadOf(speedups)
	res.values("%s", map[string]float64{"amp_top": spreadOf(rowsBy[top].listP50).Median / base,
		"amp_after_merge": spreadOf(rowsBy[after].listP50).Median / base, "list_speedup_merged": sp.Median})
	res.note("Side by side (Lists alternating between a copy of the store at %d pending and the same store merged and compacted, so a loaded machine slows both alike): a List over the pending generations took %s× the merged store's (p50 over p50).", levels[len(levels)-1], sp.fmt("%.1f"))
	res.note("The first read of each level decodes every pending generation (cold); the cache (256 MiB) then holds them, so p50 shows the per-read merge cost over N sorted files and p99 includes the cold first read.")
	return nil
}

// reads are one measurement's Get and List latencies.
type reads struct{ get, list durStats }

// listSpeedupSideBySide times n Lists alternating between two stores of target, after one untimed
// List each, and returns slowURL's p50 over fastURL's.
func listSpeedupSideBySide(ctx context.Context, o Options, target store.Target, slowURL, fastURL string, n int, after func(int) string) (float64, error) {
	var lists [2]func(after string) (time.Duration, error)
	for i, url := range []string{slowURL, fastURL} {
		db, s, err := openAs(ctx, url, "reader", o.logger(), target, noPendingCaps)
		if err != nil {
			return 0, err
		}
		defer db.Close(context.WithoutCancel(ctx))
		lists[i] = func(cursor string) (time.Duration, error) {
			t0 := time.Now()
			page, err := s.List(ctx, store.ListOptions{Limit: 100, After: cursor})
			if err != nil || len(page.Rows) != 100 {
				return 0, fmt.Errorf("list %s: %v (%d rows)", url, err, len(page.Rows))
			}
			return time.Since(t0), nil
		}
	}
	var took [2][]time.Duration
	for i := -1; i < n; i++ {
		cursor := after(max(i, 0))
		for side, list := range lists {
			d, err := list(cursor)
			if err != nil {
				return 0, err
			}
			if i >= 0 {
				took[side] = append(took[side], d)
			}
		}
	}
	return float64(summarize(took[0]).P50) / float64(summarize(took[1]).P50), nil
}
