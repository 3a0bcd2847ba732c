package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/store"
)

// The start-rate scenario measures the Temporal server's start capacity on its own: MergeWal
// starts through contract.StartMergeWal (the path every trigger and the sweep's
// StartWorkflows use: workflow ID, ID policies, search attributes, summary) with no worker
// polling, so nothing that is started runs. The fleet scenario's sweep starts its 10,000
// MergeWal runs while the ones already started execute on the same machine; this is the rate
// the same server gives when they do not (docs/benchmarks/fleet.md).

// startRateInFlight are the starts in flight measured, one after another.
var startRateInFlight = []int{16, 64, 128}

// startRateNeeded is the rate that starts 10,000 stores within a one-minute sweep interval
// (the fleet target at 1 % of 1M stores).
const startRateNeeded = 10_000.0 / 60

// runStartRate is the start-rate scenario.
func runStartRate(ctx context.Context, o Options, res *Result) error {
	n := o.Stores
	if n <= 0 {
		n = 10_000
		if o.Quick {
			n = 300
		}
	}
	res.param("starts", n)
	res.param("in_flight", fmt.Sprint(startRateInFlight))
	res.param("workers", "none (nothing started runs)")
	tenv, err := startTemporal(ctx, o, o.OutDir, devserver.Options{})
	if err != nil {
		return err
	}
	defer tenv.close()
	t := Table{Title: "MergeWal starts through contract.StartMergeWal, no worker polling", Header: []string{"in flight", "starts", "failed", "time", "starts/s"}}
	best := 0.0
	for _, inflight := range startRateInFlight {
		var failed atomic.Int64
		var mu sync.Mutex
		var first error // the first failed start's error, so a failure says why
		t0 := time.Now()
		_ = eachN(inflight, n, func(i int) error {
			if ctx.Err() != nil {
				return nil
			}
			tg := store.Target{Kind: store.KindGeneric, Name: fmt.Sprintf("rate-%d-%07d", inflight, i+1)}
			if _, err := contract.StartMergeWal(ctx, tenv.client, tg, contract.MergeWalInput{Trigger: contract.TriggerCLI, TriggerReason: "bench start-rate"}); err != nil {
				failed.Add(1)
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			return nil
		})
		d := time.Since(t0)
		rate := float64(int64(n)-failed.Load()) / d.Seconds()
		best = max(best, rate)
		o.progressf("start-rate: %d in flight: %d starts in %s, %.0f/s, %d failed", inflight, n, fmtDur(d), rate, failed.Load())
		if first != nil {
			o.progressf("start-rate: %d in flight: the first failed start: %v", inflight, first)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(inflight), fmt.Sprint(n), fmt.Sprint(failed.Load()), fmtDur(d), fmt.Sprintf("%.0f", rate)})
		res.Values[fmt.Sprintf("starts_per_s_%d", inflight)] = rate
		res.Values[fmt.Sprintf("failed_%d", inflight)] = float64(failed.Load())
	}
	res.Tables = append(res.Tables, t)
	res.Values["best_starts_per_s"] = best
	res.target("starts/s the server accepts (best of the in-flight levels)", fmt.Sprintf("≥ %.0f (10,000 within a minute)", startRateNeeded),
		fmt.Sprintf("%.0f", best), best >= startRateNeeded)
	return nil
}
