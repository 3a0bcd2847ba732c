package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// temporalEnv is a client to a dev server started for the run, or to Options.Temporal.
type temporalEnv struct {
	hostPort string
	client   client.Client
	srv      *devserver.Server
	cluster  *temporalcluster.Cluster // the PostgreSQL-backed server (temporal-overhead, fairness)
}

func (e *temporalEnv) close() {
	if e.client != nil {
		e.client.Close()
	}
	if e.srv != nil {
		_ = e.srv.Stop()
	}
	if e.cluster != nil {
		_ = e.cluster.Stop()
	}
}

// serverPID is the Temporal server process (0 for an existing server).
func (e *temporalEnv) serverPID() int {
	switch {
	case e.srv != nil:
		return e.srv.PID()
	case e.cluster != nil:
		return e.cluster.ServerPID()
	}
	return 0
}

// startCluster starts the production Temporal server on PostgreSQL
// (internal/testkit/temporalcluster) with dc over its dynamic config and its metrics on
// metricsPort.
func startCluster(ctx context.Context, o Options, dir string, metricsPort int, dc map[string]any) (*temporalEnv, error) {
	o.progressf("starting Temporal server on PostgreSQL (internal/testkit/temporalcluster)")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cl, err := temporalcluster.Start(sctx, temporalcluster.Options{
		Dir:              dir,
		SearchAttributes: true,
		MetricsPort:      metricsPort,
		Progress:         o.Progress,
		DynamicConfig:    dc,
	})
	if err != nil {
		return nil, fmt.Errorf("start Temporal on PostgreSQL (logs in %s; install with scripts/install-servers.sh): %w", dir, err)
	}
	return (&temporalEnv{hostPort: cl.HostPort(), cluster: cl}).dial(ctx, o)
}

// dial connects the env's client to its server in the default namespace; on failure it closes the env.
func (e *temporalEnv) dial(ctx context.Context, o Options) (*temporalEnv, error) {
	c, err := temporaladmin.Dial(ctx, temporaladmin.Config{HostPort: e.hostPort, Namespace: temporaladmin.DefaultNamespace}, o.logger())
	if err != nil {
		e.close()
		return nil, fmt.Errorf("dial Temporal at %s: %w", e.hostPort, err)
	}
	e.client = c
	return e, nil
}

// startTemporal connects to o.Temporal or starts a dev server (log in logDir/temporal.log).
func startTemporal(ctx context.Context, o Options, logDir string, dev devserver.Options) (*temporalEnv, error) {
	env := &temporalEnv{hostPort: o.Temporal}
	if env.hostPort == "" {
		o.progressf("starting Temporal dev server (temporal server start-dev, headless)")
		dev.Install, dev.Headless, dev.LogLevel, dev.Output, dev.Progress = true, true, "error", io.Discard, o.Progress
		if logDir != "" {
			if err := os.MkdirAll(logDir, 0o755); err != nil {
				return nil, err
			}
			f, err := os.Create(filepath.Join(logDir, "temporal.log"))
			if err == nil {
				defer func() { _ = f.Sync() }()
				dev.Output = f
			}
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		srv, err := devserver.Start(sctx, dev)
		if err != nil {
			return nil, fmt.Errorf("start Temporal dev server: %w", err)
		}
		env.srv = srv
		env.hostPort = srv.HostPort()
	}
	env, err := env.dial(ctx, o)
	if err != nil {
		return nil, err
	}
	// Retried as a starting worker retries it: the dev server of a busy machine answers late.
	retrying := func(err error) { o.progressf("search attributes: retrying: %v", err) }
	if err := temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, retrying, func(ctx context.Context) error {
		return temporaladmin.EnsureSearchAttributes(ctx, env.client, temporaladmin.DefaultNamespace)
	}); err != nil {
		env.close()
		return nil, fmt.Errorf("register search attributes: %w", err)
	}
	return env, nil
}

// nodeConfig configures one in-process walkeeper node.
type nodeConfig struct {
	FlushInterval         time.Duration
	MergeAfterGenerations int
	// MergeSlots and SharedActivitySlots are the worker's slots (0 = the worker's default).
	MergeSlots          int
	SharedActivitySlots int
	ParallelPrepare     bool // --merge-parallel-prepare (the worker's default)
	StartConcurrency    int  // --sweep-start-concurrency (0 = the default)
	PrepareConcurrency  int  // --merge-prepare-concurrency (0 = the default)
	// NoSharedWorker leaves out the shared-queue worker and ShardPollers sets the shard queue's
	// pollers (0 = default): hundreds of nodes would otherwise be hundreds of idle long polls.
	NoSharedWorker bool
	ShardPollers   int
	// DeadlockDetection overrides the SDK's 1 s deadlock detector (0 = default) for a starved CPU.
	DeadlockDetection time.Duration
}

// node is one walkeeper worker minus its HTTP data plane, wired as worker.Worker wires it but on a
// DB the caller opened, so its storage requests go through the bench's latency model.
type node struct {
	db      *store.DB
	flusher *worker.Flusher
	tws     []tworker.Worker
	cancel  context.CancelFunc
}

func startNode(ctx context.Context, c client.Client, db *store.DB, cfg nodeConfig, log *zap.Logger) (*node, error) {
	metrics := worker.NewMetrics(db.Options().Budget)
	n := &node{db: db, flusher: worker.NewFlusher(worker.FlusherOptions{
		Interval:              cfg.FlushInterval,
		MergeAfterGenerations: cfg.MergeAfterGenerations,
		CountInput:            contract.MergeWalInput{ParallelPrepare: cfg.ParallelPrepare, PrepareConcurrency: cfg.PrepareConcurrency},
		Start:                 worker.TemporalMergeStarter(c, contract.DefaultMergeRunTimeout, nil),
		Logger:                log.Named("sweeper"),
		Metrics:               metrics,
		Resident:              db.Resident,
	})}
	acts := &activities.Activities{DB: db, Logger: log.Named("activities"), Metrics: metrics, Client: c,
		StartConcurrency: cfg.StartConcurrency}
	// Local activities at the SDK's bound, as in the runs docs/BENCHMARKS.md records.
	tws := worker.TemporalWorkers{
		Identity:            "bench/" + db.Shard(),
		SharedActivitySlots: cmp.Or(cfg.SharedActivitySlots, worker.DefaultConfig().SharedActivitySlots),
		MergeSlots:          cmp.Or(cfg.MergeSlots, worker.DefaultConfig().MergeSlots),
		ShardPollers:        cfg.ShardPollers,
		StopTimeout:         5 * time.Second,
		DeadlockDetection:   cfg.DeadlockDetection,
		ShardOnly:           cfg.NoSharedWorker,
	}.New(c, db.Shard(), acts)
	for _, tw := range tws {
		if err := tw.Start(); err != nil {
			n.stop(ctx)
			return nil, fmt.Errorf("start Temporal worker: %w", err)
		}
		n.tws = append(n.tws, tw)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	n.flusher.Start(sctx)
	return n, nil
}

// stop stops the flusher and the Temporal workers; it leaves the DB open.
func (n *node) stop(ctx context.Context) {
	if n.cancel != nil {
		n.cancel()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = n.flusher.Stop(sctx)
	for _, tw := range n.tws {
		tw.Stop()
	}
	n.tws = nil
}
