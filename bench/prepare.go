package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// parallelPrepare is the parallel-prepare scenario (docs/benchmarks/parallel-prepare.md): 4 shards
// prepared serially and at once, on file:// and with 10 ms per request, aborted after each round.
func parallelPrepare(ctx context.Context, o Options, res *Result, dir string) error {
	const shards = 4
	gens, rows, payload := fullOrQuick(o, 8, 4), 256, 4<<10 // 1 MiB generations
	rounds := fullOrQuick(o, 3, 1)
	res.params("shards", shards, "per_shard", fmt.Sprintf("%d generations × %.0f MiB", gens, mib(int64(rows*(payload+64)))),
		"rounds_per_rep", rounds, "storage", "file:// with fsync")
	url := fileURL(filepath.Join(dir, "store"), false)
	target := genericTarget("pp")
	var shardIDs []string
	for i := 0; i < shards; i++ {
		shard, err := writeStore(ctx, o, url, fmt.Sprintf("writer-%d", i), target.Name, gens, rows, payload, 1<<30, int64(i)<<32)
		if err != nil {
			return err
		}
		shardIDs = append(shardIDs, shard)
	}
	// maxInFlight[parallel]: the most storage requests in flight at once during the prepares.
	maxInFlight := map[bool]int64{}
	prepareAll := func(parallel bool, round int, latency time.Duration) (time.Duration, error) {
		lat := &latencyFaults{}
		lat.d.Store(int64(latency))
		db, err := openLatencyDB(ctx, url, lat, storeOptions("merger", o.logger(), func(so *store.Options) { so.MergeMaxGenerations = 0 }))
		if err != nil {
			return 0, err
		}
		defer db.Close(context.WithoutCancel(ctx))
		s, err := db.Open(ctx, target)
		if err != nil {
			return 0, err
		}
		lat.maxInFlight.Store(0)
		prepared := make([]*store.PreparedMerge, shards)
		one := func(i int) error {
			p, err := s.Prepare(ctx, store.PrepareParams{Shard: shardIDs[i], AttemptKey: fmt.Sprintf("pp/%v/%d/%d/%s", parallel, round, i, latency)})
			if err == nil && p == nil {
				err = fmt.Errorf("shard %d had nothing pending", i)
			}
			prepared[i] = p
			return err
		}
		t0 := time.Now()
		limit := shards
		if !parallel {
			limit = 1 // one after another, in shard order
		}
		err = eachN(limit, shards, one)
		d := time.Since(t0)
		if latency > 0 {
			maxInFlight[parallel] = max(maxInFlight[parallel], lat.maxInFlight.Load())
		}
		for _, p := range prepared {
			if p != nil {
				_, aerr := s.Abort(ctx, p)
				if err == nil {
					err = aerr
				}
			}
		}
		return d, err
	}
	t := Table{Title: "Time to prepare 4 shards (ms per round), median over repetitions, range in brackets",
		Header: []string{"storage", "serial", "parallel (4 at once)", "serial / parallel"}}
	for vi, latency := range []time.Duration{0, 10 * time.Millisecond} {
		label := "file:// (local disk, CPU-bound)"
		if latency > 0 {
			label = fmt.Sprintf("file:// + %s per request (object-store model)", latency)
		}
		var ratios, serials, parallels []float64
		for rep := 0; rep < o.reps(); rep++ {
			var sd, pd time.Duration
			for r := 0; r < rounds; r++ {
				for _, par := range inTurn(rep+r, false, true) {
					d, err := prepareAll(par, rep*rounds+r, latency)
					if err != nil {
						return err
					}
					if par {
						pd += d
					} else {
						sd += d
					}
				}
			}
			ratios = append(ratios, sd.Seconds()/pd.Seconds())
			serials = append(serials, ms(sd)/float64(rounds))
			parallels = append(parallels, ms(pd)/float64(rounds))
			o.progressf("parallel-prepare: %s rep %d/%d: serial %s, parallel %s, ratio %.2f", label, rep+1, o.reps(), fmtDur(sd/time.Duration(rounds)), fmtDur(pd/time.Duration(rounds)), sd.Seconds()/pd.Seconds())
		}
		r, sp, pp := spreadOf(ratios), spreadOf(serials), spreadOf(parallels)
		t.Rows = append(t.Rows, []string{label, sp.fmt("%.0f"), pp.fmt("%.0f"), r.fmt("%.2f")})
		res.target("parallel prepare speed-up, "+label, "≥ 1.5×", r.fmt("%.2f")+"×", r.Median >= 1.5)
		res.Values[[]string{"ratio", "ratio_latency"}[vi]] = r.Median
		if latency > 0 {
			// Sequential round trips per prepare: what reading generations concurrently cuts.
			res.values("%s", map[string]float64{"serial_ms_latency": sp.Median, "parallel_ms_latency": pp.Median, "roundtrips_per_prepare": sp.Median / shards / ms(latency),
				"max_in_flight_serial": float64(maxInFlight[false]), "max_in_flight_parallel": float64(maxInFlight[true])})
		}
	}
	res.Tables = append(res.Tables, t)
	res.note("With 10 ms per request, at most %d storage requests were in flight at once during the serial prepares and %d during the parallel ones.", maxInFlight[false], maxInFlight[true])
	res.note("A prepare reads its generations concurrently (at most 8 at once), so with a per-request latency its own time is a handful of round trips (loadShard, loadBase, list, the reads, the staged write); 4 prepares at once overlap those chains. On a local disk prepares are CPU-bound (newest-per-key, Parquet encode) and 4 prepares on 2 busy vCPUs only compete.")
	return nil
}
