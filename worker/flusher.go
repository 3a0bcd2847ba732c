package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// FlusherOptions configures a Flusher. Flush is injectable for tests.
type FlusherOptions struct {
	Interval time.Duration // period of each kind's loop; 0 = Start does nothing
	Timeout  time.Duration // per-store seal timeout (0 = max(5 × Interval, 30s)); a slower seal is abandoned for the tick
	// MergeAfterGenerations is the count trigger threshold (0 = off).
	MergeAfterGenerations int
	// CountInput carries the knobs of count-trigger starts: ParallelPrepare (it only matters
	// where more than one shard is pending), MaxShardsPerCommit and PrepareConcurrency (0: the
	// workflow's defaults), from Config.MergeParallelPrepare, … .
	CountInput contract.MergeWalInput
	// Start starts or attaches to MergeWal; nil disables the count trigger.
	Start   MergeStarter
	Logger  *zap.Logger
	Metrics *Metrics
	// Resident lists the stores to flush (db.Resident). Only those with a resident writer,
	// or a dead one holding rows, are sealed; see FlushKind.
	Resident func() []*store.Store
	// Flush seals one store (default (*store.Store).Flush).
	Flush func(ctx context.Context, s *store.Store) (store.FlushResult, error)
}

// Flusher seals the memtables of resident stores every interval and then runs the merge count
// trigger, one loop per kind so that no kind delays another's seals. A seal past the per-store
// timeout is abandoned for the tick and its store skipped until it returns, which the
// bucket's stall timeout guarantees.
type Flusher struct {
	opts     FlusherOptions
	triggers *mergeTriggers

	// life ends at Stop; every seal runs under it (and under its caller's context), so Stop
	// ends abandoned seals whoever called FlushKind.
	life     context.Context
	endLife  context.CancelFunc
	mu       sync.Mutex
	inflight map[string]bool // target -> a seal is running (possibly abandoned)
	loops    sync.WaitGroup
	seals    sync.WaitGroup
}

// NewFlusher builds a flusher; call Start to run it.
func NewFlusher(opts FlusherOptions) *Flusher {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil) // a registry nobody reads
	}
	if opts.Flush == nil {
		opts.Flush = func(ctx context.Context, s *store.Store) (store.FlushResult, error) { return s.Flush(ctx) }
	}
	if opts.Timeout <= 0 {
		opts.Timeout = max(5*opts.Interval, minFlushTimeout)
	}
	life, endLife := context.WithCancel(context.Background())
	return &Flusher{life: life, endLife: endLife, opts: opts, inflight: map[string]bool{},
		triggers: &mergeTriggers{start: opts.Start, threshold: opts.MergeAfterGenerations, countInput: opts.CountInput,
			log: opts.Logger, metrics: opts.Metrics, life: life, now: time.Now,
			retry: map[string]bool{}, inflight: map[string]bool{}},
	}
}

// Start runs one loop per kind until Stop (or ctx ends). With Interval 0 it does nothing.
func (fl *Flusher) Start(ctx context.Context) {
	if fl.opts.Interval <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(fl.life, cancel) // Stop ends the loops
	for _, k := range store.Kinds {
		fl.loops.Go(func() {
			t := time.NewTicker(fl.opts.Interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					fl.FlushKind(ctx, k)
				}
			}
		})
	}
}

// Stop ends the loops and waits for them and for abandoned seals, at most until ctx ends.
func (fl *Flusher) Stop(ctx context.Context) error {
	fl.endLife()
	done := make(chan struct{})
	go func() {
		fl.loops.Wait()
		fl.seals.Wait()
		fl.triggers.stop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FlushKind seals, one after another, every resident store of one kind that has a writer in
// this process or a dead one holding rows in the WAL only (Store.HoldsOrphanedRows); sealing a
// store only read would cost a LIST of its WAL every tick. A crashed run's WAL is replayed by
// DB.Recover at start.
func (fl *Flusher) FlushKind(ctx context.Context, k store.Kind) {
	var stores []*store.Store
	for _, s := range fl.opts.Resident() {
		if s.Target().Kind == k && (s.HasWriter() || s.HoldsOrphanedRows()) {
			stores = append(stores, s)
		}
	}
	fl.opts.Metrics.flusherStores.WithLabelValues(string(k)).Set(float64(len(stores)))
	fl.triggers.forgetUnflushed(k, stores)
	for _, s := range stores {
		if ctx.Err() != nil {
			return
		}
		fl.flushStore(ctx, s)
	}
}

// Who takes a seal's outcome (flushStore): the pass still waits for it, has it, or has
// abandoned it to the seal.
const (
	sealWaited int32 = iota
	sealDelivered
	sealAbandoned
)

// flushStore seals one store with the per-store timeout, then runs the count trigger.
func (fl *Flusher) flushStore(ctx context.Context, s *store.Store) {
	t := s.Target()
	key := t.String()
	kind := string(t.Kind)

	fl.mu.Lock()
	if fl.inflight[key] {
		fl.mu.Unlock()
		fl.opts.Metrics.flusherSkipped.WithLabelValues(kind).Inc()
		fl.opts.Logger.Debug("flush sweeper skips a store whose previous seal is still running", zap.String("target", key))
		return
	}
	fl.inflight[key] = true
	fl.mu.Unlock()

	// The seal is not bound to the per-store timer: an abandoned seal keeps making progress
	// instead of being cancelled and redone from scratch every tick. It ends with the caller's
	// context or with Stop.
	sealCtx, cancelSeal := context.WithCancel(fl.life)
	unhook := context.AfterFunc(ctx, cancelSeal)
	var res store.FlushResult // the pass reads it only once done hands it the error
	done := make(chan error, 1)
	started := time.Now()
	// owner says who takes the seal's outcome: this pass, or, once the pass has given up on
	// it, the seal itself, which then reports its failure or runs the count trigger.
	var owner atomic.Int32
	fl.seals.Go(func() {
		defer cancelSeal()
		defer unhook()
		// A panic of the seal is its error: the store's in-flight mark must go, or every later
		// sweep would skip the store as still sealing.
		err := func() (err error) {
			defer store.RecoverTo(fl.opts.Logger, "flush sweeper seal", &err)
			res, err = fl.opts.Flush(sealCtx, s)
			return err
		}()
		if err == nil {
			fl.opts.Metrics.flusherFlush.Observe(time.Since(started).Seconds())
		}
		fl.mu.Lock()
		delete(fl.inflight, key)
		fl.mu.Unlock()
		if owner.CompareAndSwap(sealWaited, sealDelivered) {
			done <- err
			return
		}
		switch {
		case err != nil && sealCtx.Err() == nil:
			fl.opts.Logger.Warn("flush sweeper: an abandoned seal failed; the next tick seals the store again",
				zap.String("target", key), zap.String("kind", kind), zap.Error(err))
		case err == nil:
			// The next pass of an idle store seals nothing, so this seal's count is the one to act on.
			fl.triggers.afterFlush(t, res)
		}
	})

	timer := time.NewTimer(fl.opts.Timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		if !owner.CompareAndSwap(sealWaited, sealAbandoned) {
			err = <-done // it completed as the timer fired
			break
		}
		fl.opts.Metrics.flusherTimeouts.WithLabelValues(kind).Inc()
		fl.opts.Metrics.Store.FlushTotal.WithLabelValues(kind, "timeout").Inc()
		fl.opts.Logger.Warn("flush sweeper timed out; abandoning this store this tick",
			zap.String("target", key), zap.String("kind", kind), zap.Duration("timeout", fl.opts.Timeout))
		return
	case <-ctx.Done():
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			fl.opts.Logger.Warn("flush sweeper failed to seal", zap.String("target", key), zap.String("kind", kind), zap.Error(err))
		}
		return
	}
	if res.Sealed {
		fl.opts.Logger.Debug("flush sweeper sealed", zap.String("target", key), zap.Uint64("generation", res.Generation),
			zap.Int("rows", res.Rows), zap.Int("pending", res.Pending))
	}
	// A merge-start failure is a trigger outcome, never a flush failure.
	fl.triggers.afterFlush(t, res)
}
