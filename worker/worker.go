package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// Worker is one walkeeper worker process: the store handle, the HTTP data plane, the flush
// sweeper and, with a Temporal client, its two Temporal workers.
type Worker struct {
	cfg     Config
	log     *zap.Logger
	tc      client.Client
	budget  *store.Budget
	metrics *Metrics
	start   MergeStarter
	// ensureWithin bounds how long the start retries registering the search attributes and
	// ensuring the schedules on a Temporal that answers late or not at all.
	ensureWithin time.Duration

	// bucket is cfg.Storage as Run's caller opened it, for Start to run the store on instead
	// of opening it again; nil = Start opens it.
	bucket *objstore.Bucket

	mu       sync.Mutex
	started  bool
	stopped  bool
	db       *store.DB
	api      *apiServer
	srv      *http.Server
	ln       net.Listener
	serveErr chan error
	flusher  *Flusher
	temporal []tworker.Worker
	cancel   context.CancelFunc // background work: flush loops, WAL recovery, stuck-run scan, schedules, probes
	bg       sync.WaitGroup

	// failed ends, with the error as its cause, when a Temporal worker stopped on an error the
	// SDK does not retry: it never polls again, so Run ends for the process to be restarted.
	failed context.Context
	fail   context.CancelCauseFunc
}

// New validates cfg and prepares a worker; it does no I/O. tc may be nil: the worker then runs
// in HTTP-only mode (no Temporal workers, no count trigger, merge-wal answers 503).
func New(cfg Config, logger *zap.Logger, tc client.Client) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	budget := store.NewBudget(cfg.MergeBudgetBytes)
	w := &Worker{
		cfg:     cfg,
		log:     logger.With(zap.String("instance", cfg.Instance)),
		tc:      tc,
		budget:  budget,
		metrics: NewMetrics(budget),

		ensureWithin: temporaladmin.EnsureWithin,
	}
	w.failed, w.fail = context.WithCancelCause(context.Background())
	if tc != nil {
		w.start = TemporalMergeStarter(tc, cfg.MergeRunTimeout, cfg.FairnessWeights)
	}
	return w, nil
}

// Metrics returns the worker's registry and collectors.
func (w *Worker) Metrics() *Metrics { return w.metrics }

// DB is the store handle (nil before Start).
func (w *Worker) DB() *store.DB {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.db
}

// HTTPAddr is the address the data plane listens on ("" before Start).
func (w *Worker) HTTPAddr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ln == nil {
		return ""
	}
	return w.ln.Addr().String()
}

// Start opens the store, listens, registers and starts the Temporal workers and the flush
// sweeper. On error everything already started is stopped again.
func (w *Worker) Start(ctx context.Context) (err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("worker: already started")
	}
	w.started = true
	defer func() {
		if err != nil {
			w.teardownLocked(context.WithoutCancel(ctx))
		}
	}()

	w.applyMemoryLimit()

	opts := w.cfg.StoreOptions()
	opts.Logger = w.log
	opts.Metrics = w.metrics.Store
	opts.Budget = w.budget
	var db *store.DB
	if w.bucket != nil {
		db = store.OpenDBOnBucket(w.bucket, opts)
	} else if db, err = store.OpenDB(ctx, w.cfg.Storage, opts); err != nil {
		return fmt.Errorf("open storage %s: %w", w.cfg.Storage, err)
	}
	w.db = db
	// Activities log the shard they merge as "shard", so this process's own shard goes under
	// another name in their lines.
	actLog := w.log.With(zap.String("worker_shard", db.Shard()))
	log := w.log.With(zap.String("shard", db.Shard()))
	w.log = log

	w.flusher = NewFlusher(FlusherOptions{
		Interval:              w.cfg.FlushInterval,
		Timeout:               w.cfg.FlushTimeout,
		MergeAfterGenerations: w.cfg.MergeAfterGenerations,
		CountInput: contract.MergeWalInput{ParallelPrepare: w.cfg.MergeParallelPrepare,
			MaxShardsPerCommit: w.cfg.MergeShardsPerCommit, PrepareConcurrency: w.cfg.MergePrepareConcurrency},
		Start:    w.start,
		Logger:   log.Named("sweeper"),
		Metrics:  w.metrics,
		Resident: db.Resident,
	})
	ln, err := net.Listen("tcp", w.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", w.cfg.Listen, err)
	}
	w.ln = ln
	w.api = newAPIServer(db, w.cfg, ln.Addr(), log.Named("http"), w.metrics, w.flusher.triggers)
	w.warnIfUnauthenticated(ln.Addr())

	if w.tc != nil {
		if err := w.startTemporalLocked(ctx, db, actLog.Named("activities")); err != nil {
			return err
		}
	} else {
		log.Warn("no Temporal client: HTTP-only mode (no merges, no count trigger)")
	}

	w.srv = newHTTPServer(w.cfg, w.api, log.Named("http"))
	w.serveErr = make(chan error, 1)
	go func(srv *http.Server, ln net.Listener) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", zap.Error(err))
			w.serveErr <- err
		}
		close(w.serveErr)
	}(w.srv, limitConnections(ln, w.cfg.MaxConnections))

	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	w.flusher.Start(bgCtx)
	if w.tc != nil && w.cfg.StuckScanInterval > 0 {
		scan := &stuckScan{c: w.tc, namespace: w.cfg.Temporal.Namespace, interval: w.cfg.StuckScanInterval,
			deadline: w.cfg.MergeRunTimeout, log: w.log.Named("stuck"), metrics: w.metrics, now: time.Now,
			pageSize: maxStuckDescribes}
		w.bg.Go(func() { scan.run(bgCtx) })
	}
	if w.cfg.FlushInterval <= 0 {
		log.Warn("flush sweeper is off (--flush-interval 0): appends stay invisible to other processes until a manual flush or shutdown")
	}
	// Replay WAL left unsealed by a previous run of this instance, in the background.
	w.bg.Go(func() {
		n, err := db.Recover(bgCtx)
		switch {
		case err != nil && bgCtx.Err() == nil:
			log.Warn("recovering unsealed WAL failed; rows stay durable and are retried on the next start", zap.Error(err))
		case n > 0:
			log.Info("recovered unsealed WAL", zap.Int("stores", n))
		}
	})
	if w.tc != nil {
		w.bg.Go(func() { w.ensureSchedules(bgCtx) })
		w.bg.Go(func() {
			w.checkPartitions(bgCtx, db.Shard())
			if w.cfg.FairnessProbe {
				w.checkFairness(bgCtx)
			}
		})
	}
	log.Info("worker started", zap.String("listen", ln.Addr().String()), zap.String("storage", w.cfg.Storage),
		zap.Bool("temporal", w.tc != nil), zap.String("temporal_host_port", w.cfg.Temporal.HostPort),
		zap.String("namespace", w.cfg.Temporal.Namespace), zap.Duration("flush_interval", w.cfg.FlushInterval),
		zap.Int("merge_after_generations", w.cfg.MergeAfterGenerations))
	return nil
}

// maxIdentityInstanceBytes bounds the part of --instance a Temporal worker's identity
// repeats: Temporal refuses every poll whose identity is longer than its ID limit (1,000 bytes
// by default), and the SDK stops a worker whose polls it keeps refusing.
const maxIdentityInstanceBytes = 256

// workerIdentity is the identity of this process's Temporal workers, pid@host/instance; an
// instance longer than maxIdentityInstanceBytes is cut, and its shard id added so that cut
// instances stay apart. Pure.
func workerIdentity(pid int, host, instance, shard string) string {
	if len(instance) > maxIdentityInstanceBytes {
		instance = contract.Clip(instance, maxIdentityInstanceBytes) + "/" + shard
	}
	return fmt.Sprintf("%d@%s/%s", pid, contract.Clip(host, maxIdentityInstanceBytes), instance)
}

// startTemporalLocked registers search attributes (retried for up to w.ensureWithin, before
// anything can start a workflow that needs them; one of another type fails it) and starts
// both Temporal workers, whose activities log to actLog.
func (w *Worker) startTemporalLocked(ctx context.Context, db *store.DB, actLog *zap.Logger) error {
	log := w.log
	retrying := func(err error) {
		log.Warn("Temporal is not answering yet; registering the search attributes again", zap.Error(err))
	}
	if err := temporaladmin.RetryTransient(ctx, w.ensureWithin, retrying, func(ctx context.Context) error {
		return temporaladmin.EnsureSearchAttributes(ctx, w.tc, w.cfg.Temporal.Namespace)
	}); errors.Is(err, temporaladmin.ErrSearchAttributeType) {
		// Every merge and compaction of every store would fail its workflow tasks until its
		// run timeout, then the next one: refused at start, not wedged at every run.
		return err
	} else if err != nil {
		log.Warn("could not register search attributes; workflow starts may fail until they exist", zap.Error(err))
	}
	host, _ := os.Hostname()
	identity := workerIdentity(os.Getpid(), host, w.cfg.Instance, db.Shard())
	acts := &activities.Activities{DB: db, Logger: actLog, Metrics: w.metrics, Client: w.tc,
		StartConcurrency: w.cfg.SweepStartConcurrency, RunTimeout: w.cfg.MergeRunTimeout, FairnessWeights: w.cfg.FairnessWeights}

	if !w.cfg.StickyWorkflows {
		// Process-wide in the SDK; a worker process runs only these workers.
		tworker.SetStickyWorkflowCacheSize(0)
	}
	// MergeWal's listings run as local activities on this worker (workflows/merge_list.go),
	// so it registers every activity; they keep the bound they had as activity tasks on this
	// queue instead of the SDK's 1,000, so a sweep that starts hundreds of merges at once does
	// not read every store's manifests at once.
	tws := TemporalWorkers{
		Identity:            identity,
		SharedActivitySlots: w.cfg.SharedActivitySlots,
		LocalActivitySlots:  w.cfg.SharedActivitySlots,
		MergeSlots:          w.cfg.MergeSlots,
		StopTimeout:         w.cfg.ShutdownTimeout / 2,
		DeadlockDetection:   w.cfg.WorkflowDeadlock,
		OnFatalError: func(err error) {
			log.Error("a Temporal worker stopped on an error it does not retry and will not poll again; the worker stops so that it is restarted",
				zap.Error(err))
			w.fail(fmt.Errorf("Temporal worker stopped: %w", err))
		},
	}.New(w.tc, db.Shard(), acts)
	for _, tw := range tws {
		if err := tw.Start(); err != nil {
			return fmt.Errorf("start Temporal worker: %w", err)
		}
		w.temporal = append(w.temporal, tw)
	}
	log.Info("temporal workers started", zap.String("shared_queue", contract.TaskQueue),
		zap.String("shard_queue", contract.ShardQueue(db.Shard())), zap.Int("merge_slots", w.cfg.MergeSlots))
	return nil
}

// ensureSchedules creates or updates the sweep and reconcile schedules the config turns on,
// each retried for up to w.ensureWithin so a server just started still gets them; ensuring
// again is harmless (a window already triggered is skipped while it runs).
func (w *Worker) ensureSchedules(ctx context.Context) {
	ensure := func(id, remedy string, op func(context.Context) error) {
		retrying := func(err error) {
			w.log.Warn("Temporal is not answering yet; ensuring the schedule again", zap.String("schedule", id), zap.Error(err))
		}
		if err := temporaladmin.RetryTransient(ctx, w.ensureWithin, retrying, op); err != nil && ctx.Err() == nil {
			w.log.Error("could not ensure schedule; once Temporal answers, "+remedy, zap.String("schedule", id), zap.Error(err))
		}
	}
	if w.cfg.SweepInterval > 0 {
		sweep := temporaladmin.SweepSchedule{
			Every:  w.cfg.SweepInterval,
			Window: w.cfg.SweepWindow,
			Jitter: w.cfg.SweepJitter,
			Input: contract.MaintenanceSweepInput{MergeMinGenerations: w.cfg.SweepMergeMinGenerations,
				MaxStarts: w.cfg.SweepMaxStarts, StartBatch: w.cfg.SweepStartBatch,
				StartSpacing: cmp.Or(w.cfg.SweepStartSpacing, -1)}, // -1: the sweep's "no pacing"
		}
		ensure(temporaladmin.SweepScheduleID, "run `walkeeper schedule ensure`", func(ctx context.Context) error {
			return temporaladmin.EnsureSweepSchedule(ctx, w.tc, sweep)
		})
	}
	if w.cfg.ReconcileInterval > 0 {
		ensure(temporaladmin.ReconcileScheduleID, "restart a worker", func(ctx context.Context) error {
			return temporaladmin.EnsureReconcileSchedule(ctx, w.tc, w.cfg.ReconcileInterval)
		})
	}
}

// Stop shuts down gracefully (HTTP, flusher and in-flight activities drain concurrently, then
// the store seals every resident memtable), bounded by ShutdownTimeout; idempotent.
func (w *Worker) Stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok && w.cfg.ShutdownTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
		defer cancel()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped {
		return nil
	}
	err := w.teardownLocked(ctx)
	if err != nil {
		w.log.Warn("worker stopped with errors", zap.Error(err))
	} else {
		w.log.Info("worker stopped")
	}
	return err
}

// teardownLocked stops the HTTP server, the flusher and the Temporal workers concurrently, the
// HTTP and activity drains at most half the time each so the final seal has some left, then
// closes the store.
func (w *Worker) teardownLocked(ctx context.Context) error {
	w.stopped = true
	if w.api != nil {
		w.api.stop() // merge waiters answer at once
	}
	if w.cancel != nil {
		w.cancel() // background work
	}
	var httpErr, flushErr error
	var wg sync.WaitGroup
	if w.srv != nil {
		wg.Go(func() {
			hctx, cancel := context.WithCancel(ctx)
			if dl, ok := ctx.Deadline(); ok {
				cancel()
				hctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
			}
			defer cancel()
			if err := w.srv.Shutdown(hctx); err != nil {
				httpErr = fmt.Errorf("http shutdown: %w", err)
				_ = w.srv.Close()
			}
			if err, ok := <-w.serveErr; ok && err != nil {
				httpErr = errors.Join(httpErr, fmt.Errorf("http serve: %w", err))
			}
		})
	} else if w.ln != nil {
		_ = w.ln.Close()
	}
	if w.flusher != nil {
		wg.Go(func() {
			if err := w.flusher.Stop(ctx); err != nil {
				flushErr = fmt.Errorf("flush sweeper: %w", err)
			}
		})
	}
	for _, tw := range w.temporal {
		wg.Go(tw.Stop) // waits up to WorkerStopTimeout for in-flight activities
	}
	wg.Wait()
	w.temporal = nil
	w.bg.Wait()
	errs := []error{httpErr, flushErr}
	if w.db != nil {
		if err := w.db.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close storage: %w", err))
		}
	}
	return errors.Join(errs...)
}

// memoryLimitHeadroom is the "fixed base" of the pod sizing rule on top of the read cache and
// read budget: the runtime, Temporal workers, memtables, bodies and small writer buffers.
const memoryLimitHeadroom = 512 << 20

// DerivedMemoryLimit is the soft memory limit the worker sets: MemoryLimitBytes when given,
// else cache + read budget + headroom, 0 when the merge budget is unlimited. Merge buffers are
// mapped outside the Go heap, so the pod's memory is this limit plus the merge budget.
func (c Config) DerivedMemoryLimit() int64 {
	if c.MemoryLimitBytes > 0 {
		return c.MemoryLimitBytes
	}
	if c.MergeBudgetBytes <= 0 {
		return 0
	}
	return c.CacheBytes + c.ReadBudgetBytes + memoryLimitHeadroom
}

// applyMemoryLimit sets the runtime's soft memory limit, so that the heap does not grow to
// twice the live bytes before a collection (docs/benchmarks/memory.md); GOMEMLIMIT in the
// environment wins.
func (w *Worker) applyMemoryLimit() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return
	}
	if lim := w.cfg.DerivedMemoryLimit(); lim > 0 {
		prev := debug.SetMemoryLimit(lim)
		w.log.Info("memory limit set", zap.Int64("bytes", lim), zap.Int64("previous", prev))
	}
}

// shutdownSealSlack is the time Run's Stop gets beyond ShutdownTimeout: Stop bounds the
// draining by ShutdownTimeout, and the store's final seal needs a little after it.
const shutdownSealSlack = 5 * time.Second

// Run is a worker process's life on a dialled client: New, Start, started (nil = nothing),
// then wait for ctx or for a Temporal worker to stop for good (its error is returned), and
// Stop within ShutdownTimeout (+5 s for the final seal). b, when not nil, is cfg.Storage
// already open (the command opens it before it dials, to refuse a root it cannot make): the
// store runs on it, and Run closes it, instead of opening the storage a second time.
func Run(ctx context.Context, cfg Config, logger *zap.Logger, c client.Client, b *objstore.Bucket, started func(*Worker)) error {
	w, err := New(cfg, logger, c)
	if err != nil {
		_ = b.Close()
		return err
	}
	w.bucket = b
	if err := w.Start(ctx); err != nil {
		return err
	}
	if started != nil {
		started(w)
	}
	select {
	case <-ctx.Done():
	case <-w.failed.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout+shutdownSealSlack)
	defer cancel()
	stopErr := w.Stop(sctx)
	if w.failed.Err() != nil {
		return errors.Join(context.Cause(w.failed), stopErr)
	}
	if stopErr != nil {
		return fmt.Errorf("stop worker: %w", stopErr)
	}
	return nil
}
