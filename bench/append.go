package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store"
)

// appendLatency is the append-latency scenario (docs/benchmarks/append-latency.md): one-row
// appends with another shard's merges running back to back against the same appends idle.
func appendLatency(ctx context.Context, o Options, res *Result, dir string) error {
	phase, appenders := fullOrQuick(o, 8*time.Second, 3*time.Second), 4
	res.params("phase", phase, "appenders", appenders, "storage", "file:// with fsync, then without",
		"merge_load", "another shard's 1 MiB generations, 8 per pass, back to back")
	for vi, nosync := range []bool{false, true} {
		label := "file:// with fsync"
		suffix := ""
		if nosync {
			label, suffix = "file:// without fsync", "_nosync"
		}
		err := func() error {
			url := fileURL(filepath.Join(dir, fmt.Sprint(vi)), nosync)
			log := o.logger()
			app, s, err := openAs(ctx, url, "appender", log, genericTarget("append"))
			if err != nil {
				return err
			}
			defer app.Close(context.WithoutCancel(ctx))
			bulk, bs, err := openAs(ctx, url, "bulk", log, s.Target())
			if err != nil {
				return err
			}
			defer bulk.Close(context.WithoutCancel(ctx))
			merger, mstore, err := openAs(ctx, url, "merger", log, s.Target())
			if err != nil {
				return err
			}
			defer merger.Close(context.WithoutCancel(ctx))
			bulkShard := bulk.Shard()

			var genSeq atomic.Int64
			produce := func(ctx context.Context, n int) error {
				for i := 0; i < n; i++ {
					seq := genSeq.Add(1)
					if err := writeGenerations(ctx, bs, 1, 256, 4<<10, 1<<30, seq*1000); err != nil {
						return err
					}
				}
				return nil
			}
			o.progressf("append-latency: pre-writing 1 MiB generations")
			if err := produce(ctx, 40); err != nil {
				return err
			}

			// Each phase's p50 and p99 and its pooled latencies, by whether merges ran (busy).
			p50s, p99s, pooled := map[bool][]float64{}, map[bool][]float64{}, map[bool][]time.Duration{}
			var merged atomic.Int64
			mergeShard := func(shard string) error {
				if _, err := mstore.MergeOnce(ctx, shard); err != nil && !errors.Is(err, store.ErrStalePreparation) {
					return err
				}
				return nil
			}
			// reset restores the store before every phase: own shard merged, 40 bulk generations pending.
			reset := func() error {
				for {
					st, err := mstore.PendingShards(ctx)
					if err != nil {
						return err
					}
					own, pend := 0, 0
					for _, sh := range st {
						switch sh.Shard {
						case bulkShard:
							pend = sh.PendingGenerations
						case app.Shard():
							own = sh.PendingGenerations
						}
					}
					switch {
					case own > 0:
						if err := mergeShard(app.Shard()); err != nil {
							return err
						}
					case pend > 40:
						if err := mergeShard(bulkShard); err != nil {
							return err
						}
					case pend < 40:
						if err := produce(ctx, 40-pend); err != nil {
							return err
						}
					default:
						return nil
					}
				}
			}
			for rep := 0; rep < o.reps(); rep++ {
				for _, busy := range inTurn(rep, false, true) {
					name := "idle"
					if busy {
						name = "busy"
					}
					if err := reset(); err != nil {
						return fmt.Errorf("reset before %s phase: %w", name, err)
					}
					o.progressf("append-latency: %s rep %d/%d %s phase (%s)", label, rep+1, o.reps(), name, phase)
					pctx, cancel := context.WithTimeout(ctx, phase)
					var wg sync.WaitGroup // the sealer and the producer
					var g errgroup.Group  // the appenders and the merger: the first error fails the phase
					lats := make([][]time.Duration, appenders)
					for a := range lats {
						g.Go(func() error {
							for n := 0; pctx.Err() == nil; n++ {
								k := fmt.Sprintf("a%d-%d-%d-%09d", rep, a, len(name), n)
								t0 := time.Now()
								if _, err := s.Append(pctx, []store.Row{genericRow(k, int64(n), payloadOf(100, int64(n)))}); err != nil {
									if pctx.Err() != nil {
										return nil // the phase's end cut it short
									}
									return err
								}
								lats[a] = append(lats[a], time.Since(t0))
							}
							return nil
						})
					}
					every(pctx, &wg, 100*time.Millisecond, func() { _, _ = s.Flush(pctx) }) // sealer
					if busy {
						g.Go(func() error { // merger
							// A pass outlives the phase (ctx, not pctx), so a slow build (-race) still merges.
							for pctx.Err() == nil {
								cr, err := mstore.MergeOnce(ctx, bulkShard)
								if err != nil {
									if pctx.Err() == nil && !errors.Is(err, store.ErrStalePreparation) {
										return fmt.Errorf("merge: %w", err)
									}
									return nil
								}
								merged.Add(int64(cr.Reclaimed))
								if cr.Reclaimed == 0 {
									time.Sleep(20 * time.Millisecond)
								}
							}
							return nil
						})
					}
					// Both phases: one 1 MiB bulk generation every 100 ms.
					every(pctx, &wg, 100*time.Millisecond, func() { _ = produce(pctx, 1) })
					err := g.Wait()
					wg.Wait()
					cancel()
					if err != nil {
						return err
					}
					lat := slices.Concat(lats...)
					st := summarize(lat)
					o.progressf("append-latency: %s: %d appends, p50 %s p99 %s", name, st.N, fmtDur(st.P50), fmtDur(st.P99))
					p50s[busy], p99s[busy] = append(p50s[busy], ms(st.P50)), append(p99s[busy], ms(st.P99))
					pooled[busy] = append(pooled[busy], lat...)
				}
			}
			i50, i99, b50, b99 := spreadOf(p50s[false]), spreadOf(p99s[false]), spreadOf(p50s[true]), spreadOf(p99s[true])
			ia, ba := summarize(pooled[false]), summarize(pooled[true])
			r50, r99 := b50.Median/i50.Median, b99.Median/i99.Median
			res.Tables = append(res.Tables, Table{
				Title:  label + ": one-row append latency (ms), median over repetitions of each phase's percentile, range in brackets",
				Header: []string{"", "idle", "merges running", "ratio"},
				Rows: [][]string{
					{"p50", i50.fmt("%.2f"), b50.fmt("%.2f"), fmt.Sprintf("%.2f", r50)},
					{"p99", i99.fmt("%.2f"), b99.fmt("%.2f"), fmt.Sprintf("%.2f", r99)},
					{"appends (all reps)", fmt.Sprint(ia.N), fmt.Sprint(ba.N), ""},
					{"pooled p50 / p99", fmtDur(ia.P50) + " / " + fmtDur(ia.P99), fmtDur(ba.P50) + " / " + fmtDur(ba.P99), ""},
				},
			})
			res.note("%s: generations merged during busy phases: %d (1 MiB each).", label, merged.Load())
			res.target(label+": append p50 busy / idle", "≤ 1.5", fmt.Sprintf("%.2f", r50), r50 <= 1.5)
			res.target(label+": append p99 busy / idle", "≤ 1.5", fmt.Sprintf("%.2f", r99), r99 <= 1.5)
			res.values("%s"+suffix, map[string]float64{"ratio_p50": r50, "ratio_p99": r99, "merged": float64(merged.Load())})
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}
