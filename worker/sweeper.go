package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// MergeStarter starts the MergeWal workflow of a target, or attaches to the one already
// running (workflow-ID dedupe). Production uses contract.StartMergeWal; tests inject fakes.
type MergeStarter func(ctx context.Context, t store.Target, in contract.MergeWalInput) (client.WorkflowRun, error)

// TemporalMergeStarter returns the MergeStarter that goes through Temporal.
func TemporalMergeStarter(c client.Client) MergeStarter {
	return func(ctx context.Context, t store.Target, in contract.MergeWalInput) (client.WorkflowRun, error) {
		return contract.StartMergeWal(ctx, c, t, in)
	}
}

// startTimeout bounds one workflow start.
const startTimeout = 10 * time.Second

// maxStartsInFlight bounds concurrent trigger starts per worker; beyond it a start is
// deferred (count trigger: retried after the next flush of that store).
const maxStartsInFlight = 8

// triggers starts MergeWal on behalf of the count trigger (after a seal, when the own shard
// has at least threshold pending generations) and the debt trigger (an append refused for
// too many pending generations). It never merges in-process. Starts run in the background, so
// a slow or unreachable Temporal frontend never holds a sweep or an HTTP response; one start
// per target at a time. A failed count start is remembered and retried after the next
// successful flush of that store, even if that flush sealed nothing.
type triggers struct {
	start     MergeStarter // nil: off (HTTP-only mode)
	threshold int          // count threshold; 0: count trigger off
	// parallel: count starts ask MergeWal for parallel prepares (it only matters where
	// more than one shard is pending; the workflow runs a single shard serially either way).
	parallel bool
	// shardsPerCommit: MergeWalInput.MaxShardsPerCommit of count starts (0 = default).
	shardsPerCommit int
	// prepareConcurrency: MergeWalInput.PrepareConcurrency of count starts (0 = default).
	prepareConcurrency int
	log                *zap.Logger
	metrics            *Metrics
	life               context.Context // ends at Sweeper.Stop

	mu       sync.Mutex
	retry    map[string]bool // target -> last count start failed
	inflight map[string]bool // target -> a start is running
	wg       sync.WaitGroup
}

func (tg *triggers) countEnabled() bool { return tg != nil && tg.start != nil && tg.threshold > 0 }

// afterFlush applies the count trigger to one successful flush and reports whether a start
// was launched.
func (tg *triggers) afterFlush(t store.Target, res store.FlushResult) bool {
	if !tg.countEnabled() {
		return false
	}
	key := t.String()
	tg.mu.Lock()
	retry := tg.retry[key]
	if res.Pending < tg.threshold && retry {
		delete(tg.retry, key) // merged meanwhile: nothing left to retry
	}
	tg.mu.Unlock()
	if res.Pending < tg.threshold || (!res.Sealed && !retry) {
		return false
	}
	return tg.fire(TriggerCount, t, res.Pending,
		fmt.Sprintf("own shard %d pending >= merge_after_generations %d", res.Pending, tg.threshold))
}

// fire launches one background start for t unless one is already running for it (or too many
// are); it reports whether it launched. trigger is the metric label (TriggerCount or
// TriggerDebt), reason the words the run's summary shows.
func (tg *triggers) fire(trigger string, t store.Target, pending int, reason string) bool {
	if tg == nil || tg.start == nil {
		return false
	}
	key := t.String()
	tg.mu.Lock()
	if tg.inflight[key] || len(tg.inflight) >= maxStartsInFlight {
		if trigger == TriggerCount && !tg.inflight[key] {
			tg.retry[key] = true
		}
		tg.mu.Unlock()
		return false
	}
	tg.inflight[key] = true
	tg.mu.Unlock()
	tg.wg.Add(1)
	go func() {
		defer tg.wg.Done()
		ctx, cancel := context.WithTimeout(tg.life, startTimeout)
		defer cancel()
		in := contract.MergeWalInput{Target: key, Trigger: workflowTrigger(trigger), TriggerReason: reason}
		if trigger == TriggerCount {
			in.ParallelPrepare = tg.parallel
			in.MaxShardsPerCommit = tg.shardsPerCommit
			in.PrepareConcurrency = tg.prepareConcurrency
		}
		run, err := tg.start(ctx, t, in)
		tg.metrics.trigger(trigger, err)
		tg.mu.Lock()
		delete(tg.inflight, key)
		if trigger == TriggerCount {
			if err != nil {
				tg.retry[key] = true
			} else {
				delete(tg.retry, key)
			}
		}
		tg.mu.Unlock()
		if err != nil {
			tg.log.Warn("could not start MergeWal", zap.String("trigger", trigger), zap.String("target", key),
				zap.Int("pending", pending), zap.Error(err))
			return
		}
		tg.log.Info("started MergeWal", zap.String("trigger", trigger), zap.String("target", key),
			zap.Int("pending", pending), zap.String("workflow_id", run.GetID()), zap.String("run_id", run.GetRunID()))
	}()
	return true
}

// workflowTrigger is the WalTrigger of a start by the trigger behind metric label trigger.
func workflowTrigger(trigger string) string {
	switch trigger {
	case TriggerCount:
		return contract.TriggerCount
	case TriggerHTTP:
		return contract.TriggerHTTP
	case TriggerDebt:
		return contract.TriggerBackPressure
	}
	return contract.TriggerUnknown
}

// forgetUnswept drops the count-start retries of kind k's stores that are not in swept (the
// stores a sweep seals): only their seals retry, so an evicted store's entry would stay for
// ever. The maintenance sweep still finds such a store's debt in the demand index.
func (tg *triggers) forgetUnswept(k store.Kind, swept []*store.Store) {
	if !tg.countEnabled() {
		return
	}
	keep := make(map[string]bool, len(swept))
	for _, s := range swept {
		keep[s.Target().String()] = true
	}
	prefix := string(k) + ":"
	tg.mu.Lock()
	for key := range tg.retry {
		if strings.HasPrefix(key, prefix) && !keep[key] {
			delete(tg.retry, key)
		}
	}
	tg.mu.Unlock()
}

// wait blocks until every launched start has returned.
func (tg *triggers) wait() { tg.wg.Wait() }

// SweeperOptions configures a Sweeper. Resident and Flush are injectable for tests.
type SweeperOptions struct {
	Interval time.Duration // period of each kind's loop; 0 = Start does nothing
	Timeout  time.Duration // per-store seal timeout; a slower seal is abandoned for the tick
	// MergeAfterGenerations is the count trigger threshold (0 = off).
	MergeAfterGenerations int
	// SerialPrepare makes count-trigger starts visit shards one pass at a time instead of
	// asking for parallel prepares (Config.MergeParallelPrepare false). The zero value keeps
	// the default: parallel prepares, which overlap the storage round trips of different
	// shards; commits stay one at a time either way.
	SerialPrepare bool
	// ShardsPerCommit is MergeWalInput.MaxShardsPerCommit of count-trigger starts
	// (Config.MergeShardsPerCommit; 0 = the workflow's default).
	ShardsPerCommit int
	// PrepareConcurrency is MergeWalInput.PrepareConcurrency of count-trigger starts
	// (Config.MergePrepareConcurrency; 0 = the workflow's default).
	PrepareConcurrency int
	// Start starts or attaches to MergeWal; nil disables the count trigger.
	Start   MergeStarter
	Logger  *zap.Logger
	Metrics *Metrics
	// Resident lists the stores to sweep (db.Resident). Only those with a resident writer
	// are sealed; see SweepKind.
	Resident func() []*store.Store
	// Flush seals one store (default (*store.Store).Flush).
	Flush func(ctx context.Context, s *store.Store) (store.FlushResult, error)
	// Observe receives every successful flush (the HTTP debt cache uses it); optional.
	Observe func(t store.Target, res store.FlushResult)
}

// Sweeper is the flush sweeper. Each store kind runs its own loop, so a kind with many or slow
// stores never delays another kind's seal (the starvation of seed PR 256). Within a kind, stores
// are sealed one after another; a seal that exceeds the per-store timeout is abandoned for the
// tick — it keeps running in the background and its store is skipped until it returns.
type Sweeper struct {
	opts    SweeperOptions
	trigger *triggers
	log     *zap.Logger
	metrics *Metrics

	// life ends at Stop; every seal runs under it (and under its caller's context), so Stop
	// can end abandoned seals that SweepOnce started as well as the loops'.
	life     context.Context
	endLife  context.CancelFunc
	mu       sync.Mutex
	inflight map[string]bool // target -> a seal is running (possibly abandoned)
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	seals    sync.WaitGroup
}

// NewSweeper builds a sweeper; call Start to run it.
func NewSweeper(opts SweeperOptions) *Sweeper {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Flush == nil {
		opts.Flush = func(ctx context.Context, s *store.Store) (store.FlushResult, error) { return s.Flush(ctx) }
	}
	if opts.Resident == nil {
		opts.Resident = func() []*store.Store { return nil }
	}
	if opts.Timeout <= 0 {
		opts.Timeout = max(5*opts.Interval, minFlushTimeout)
	}
	life, endLife := context.WithCancel(context.Background())
	return &Sweeper{
		life:    life,
		endLife: endLife,
		opts:    opts,
		trigger: &triggers{start: opts.Start, threshold: opts.MergeAfterGenerations, parallel: !opts.SerialPrepare,
			shardsPerCommit: opts.ShardsPerCommit, prepareConcurrency: opts.PrepareConcurrency,
			log: opts.Logger, metrics: opts.Metrics, life: life,
			retry: map[string]bool{}, inflight: map[string]bool{}},
		log:      opts.Logger,
		metrics:  opts.Metrics,
		inflight: map[string]bool{},
	}
}

// Start runs one loop per kind until Stop (or ctx ends). With Interval 0 it does nothing.
func (sw *Sweeper) Start(ctx context.Context) {
	if sw.opts.Interval <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	sw.mu.Lock()
	sw.cancel = cancel
	sw.mu.Unlock()
	for _, k := range store.Kinds {
		sw.loops.Add(1)
		go func() {
			defer sw.loops.Done()
			t := time.NewTicker(sw.opts.Interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					sw.SweepKind(ctx, k)
				}
			}
		}()
	}
}

// Stop ends the loops and waits for them and for abandoned seals, at most until ctx ends.
func (sw *Sweeper) Stop(ctx context.Context) error {
	sw.mu.Lock()
	cancel := sw.cancel
	sw.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	sw.endLife()
	done := make(chan struct{})
	go func() {
		sw.loops.Wait()
		sw.seals.Wait()
		sw.trigger.wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SweepOnce sweeps every kind concurrently and returns when all three passes, and the merge
// starts they triggered, are done.
func (sw *Sweeper) SweepOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, k := range store.Kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw.SweepKind(ctx, k)
		}()
	}
	wg.Wait()
	sw.trigger.wait()
}

// SweepKind seals every resident store of one kind that has a writer in this process, one
// after another. A store opened only for reads, stats or merges has nothing of this
// process's in memory, and sealing it would cost a LIST of its WAL prefix every tick (300
// resident stores: 300 LISTs per second). WAL that a crashed
// earlier run left behind is replayed by DB.Recover when the worker starts, and by the
// writer itself when this process next appends to the store.
func (sw *Sweeper) SweepKind(ctx context.Context, k store.Kind) {
	var stores []*store.Store
	for _, s := range sw.opts.Resident() {
		if s.Target().Kind == k && s.HasWriter() {
			stores = append(stores, s)
		}
	}
	if sw.metrics != nil {
		sw.metrics.sweeperStores.WithLabelValues(string(k)).Set(float64(len(stores)))
	}
	sw.trigger.forgetUnswept(k, stores)
	for _, s := range stores {
		if ctx.Err() != nil {
			return
		}
		sw.sweepStore(ctx, s)
	}
}

type flushOutcome struct {
	res store.FlushResult
	err error
}

// sweepStore seals one store with the per-store timeout, then runs the count trigger.
func (sw *Sweeper) sweepStore(ctx context.Context, s *store.Store) {
	t := s.Target()
	key := t.String()
	kind := string(t.Kind)

	sw.mu.Lock()
	if sw.inflight[key] {
		sw.mu.Unlock()
		if sw.metrics != nil {
			sw.metrics.sweeperSkipped.WithLabelValues(kind).Inc()
		}
		sw.log.Debug("flush sweeper skips a store whose previous seal is still running", zap.String("target", key))
		return
	}
	sw.inflight[key] = true
	sw.mu.Unlock()

	// The seal is not bound to the per-store timer: an abandoned seal keeps making progress
	// instead of being cancelled and redone from scratch every tick. It ends with the caller's
	// context or with Stop.
	sealCtx, cancelSeal := context.WithCancel(sw.life)
	unhook := context.AfterFunc(ctx, cancelSeal)
	done := make(chan flushOutcome, 1)
	started := time.Now()
	sw.seals.Add(1)
	go func() {
		defer sw.seals.Done()
		defer cancelSeal()
		defer unhook()
		res, err := sw.opts.Flush(sealCtx, s)
		if err == nil && sw.metrics != nil {
			sw.metrics.sweeperFlush.Observe(time.Since(started).Seconds())
		}
		sw.mu.Lock()
		delete(sw.inflight, key)
		sw.mu.Unlock()
		done <- flushOutcome{res, err}
	}()

	timer := time.NewTimer(sw.opts.Timeout)
	defer timer.Stop()
	var out flushOutcome
	select {
	case out = <-done:
	case <-timer.C:
		if sw.metrics != nil {
			sw.metrics.sweeperTimeouts.WithLabelValues(kind).Inc()
			if sw.metrics.Store != nil {
				sw.metrics.Store.FlushTotal.WithLabelValues(kind, "timeout").Inc()
			}
		}
		sw.log.Warn("flush sweeper timed out; abandoning this store this tick",
			zap.String("target", key), zap.String("kind", kind), zap.Duration("timeout", sw.opts.Timeout))
		return
	case <-ctx.Done():
		return
	}
	if out.err != nil {
		if ctx.Err() == nil {
			sw.log.Warn("flush sweeper failed to seal", zap.String("target", key), zap.String("kind", kind), zap.Error(out.err))
		}
		return
	}
	if out.res.Sealed {
		sw.log.Debug("flush sweeper sealed", zap.String("target", key), zap.Uint64("generation", out.res.Generation),
			zap.Int("rows", out.res.Rows), zap.Int("pending", out.res.Pending))
	}
	if sw.opts.Observe != nil {
		sw.opts.Observe(t, out.res)
	}
	// A merge-start failure is a trigger outcome, never a flush failure.
	sw.trigger.afterFlush(t, out.res)
}
