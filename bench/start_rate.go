package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
)

// The start-rate scenario (docs/benchmarks/fleet.md): MergeWal starts through
// contract.StartMergeWal with no worker polling, the server's start capacity on its own; a
// timed-out start counts apart from a refused one.

// startRateInFlight are the starts in flight measured, one after another.
var startRateInFlight = []int{16, 64, 128}

// startRateNeeded starts 10,000 stores (1 % of 1M) within a one-minute sweep interval.
const startRateNeeded = 10_000.0 / 60

func runStartRate(ctx context.Context, o Options, res *Result) error {
	n := cmp.Or(max(o.Stores, 0), fullOrQuick(o, 10_000, 300))
	res.params("starts", n, "in_flight", startRateInFlight, "workers", "none (nothing started runs)")
	tenv, err := startTemporal(ctx, o, o.OutDir, devserver.Options{})
	if err != nil {
		return err
	}
	defer tenv.close()
	t := Table{Title: "MergeWal starts through contract.StartMergeWal, no worker polling",
		Header: []string{"in flight", "starts", "failed", "of them timed out", "mean wait", "time", "starts/s"}}
	best := 0.0
	for _, inflight := range startRateInFlight {
		var failed, timedOut atomic.Int64
		var mu sync.Mutex
		var first, firstRefused error // the first failed start's error, so a failure says why
		t0 := time.Now()
		_ = eachN(inflight, n, func(i int) error {
			if ctx.Err() != nil {
				return nil
			}
			tg := genericTarget(fmt.Sprintf("rate-%d-%07d", inflight, i+1))
			_, err := contract.StartMergeWal(ctx, tenv.client, tg, contract.MergeWalInput{Trigger: contract.TriggerCLI, TriggerReason: "bench start-rate"})
			if err == nil {
				return nil
			}
			failed.Add(1)
			queued := startTimedOut(err) && ctx.Err() == nil
			if queued {
				timedOut.Add(1)
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			if !queued && firstRefused == nil {
				firstRefused = err
			}
			mu.Unlock()
			return nil
		})
		d := time.Since(t0)
		lv := startRateLevel{InFlight: inflight, Starts: n, Failed: int(failed.Load()), TimedOut: int(timedOut.Load()), Took: d}
		rate := lv.rate()
		best = max(best, rate)
		o.progressf("start-rate: %d in flight: %d starts in %s, %.0f/s, mean wait %s, %d failed (%d timed out)",
			inflight, n, fmtDur(d), rate, fmtDur(lv.meanWait()), lv.Failed, lv.TimedOut)
		if first != nil {
			o.progressf("start-rate: %d in flight: the first failed start: %v", inflight, first)
		}
		if firstRefused != nil && firstRefused != first {
			o.progressf("start-rate: %d in flight: the first start that failed otherwise than by timing out: %v", inflight, firstRefused)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(inflight), fmt.Sprint(n), fmt.Sprint(lv.Failed), fmt.Sprint(lv.TimedOut),
			fmtDur(lv.meanWait()), fmtDur(d), fmt.Sprintf("%.0f", rate)})
		res.values("%s_"+strconv.Itoa(inflight), map[string]float64{"starts_per_s": rate, "failed": float64(lv.Failed), "timed_out": float64(lv.TimedOut),
			"mean_wait_s": lv.meanWait().Seconds(), "starts": float64(n), "time_s": d.Seconds()})
	}
	res.Tables = append(res.Tables, t)
	res.Values["best_starts_per_s"] = best
	res.target("starts/s the server accepts (best of the in-flight levels)", fmt.Sprintf("≥ %.0f (10,000 within a minute)", startRateNeeded),
		fmt.Sprintf("%.0f", best), best >= startRateNeeded)
	return nil
}

// startTimedOut reports whether a start ran out of the RPC budget unanswered: queued, not refused.
func startTimedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*serviceerror.DeadlineExceeded))
}

// startRateLevel is what one in-flight level measured.
type startRateLevel struct {
	InFlight, Starts, Failed, TimedOut int
	Took                               time.Duration
}

// rate is the starts the server accepted per second.
func (l startRateLevel) rate() float64 {
	if l.Took <= 0 {
		return 0
	}
	return float64(l.Starts-l.Failed) / l.Took.Seconds()
}

// meanWait is a start's mean time in flight by Little's law (in flight × time / starts).
func (l startRateLevel) meanWait() time.Duration {
	if l.Starts <= 0 {
		return 0
	}
	return time.Duration(float64(l.InFlight) * float64(l.Took) / float64(l.Starts))
}
