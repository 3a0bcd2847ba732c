package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

type devOptions struct {
	data         string
	workers      int
	demo         bool
	demoDuration time.Duration
	sweepEvery   time.Duration
	port         int
	uiPort       int
	httpPort     int
	cli          string
	verbose      bool
}

// maxDevWorkers bounds --workers: each in-process worker holds its own budgets, memtable and
// Temporal pollers, and a laptop's dev run needs a handful, not a fleet.
const maxDevWorkers = 32

// check refuses a worker count past maxDevWorkers and a port no TCP socket can have, before
// anything starts; a port of 0, like one that is taken, becomes a free one.
func (o *devOptions) check() error {
	if o.workers < 1 || o.workers > maxDevWorkers {
		return cli.Usagef("--workers %d: want 1 to %d", o.workers, maxDevWorkers)
	}
	ports := []struct {
		flag      string
		port, top int
	}{
		{"temporal-port", o.port, 65535},
		{"ui-port", o.uiPort, 65535},
		{"http-port", o.httpPort, 65535 - (o.workers - 1)}, // dev-i listens on http-port+i
	}
	for _, p := range ports {
		if p.port < 0 || p.port > p.top {
			return cli.Usagef("--%s %d: want 0 (a free port) to %d", p.flag, p.port, p.top)
		}
	}
	return nil
}

// checkTemporalCLI refuses a Temporal CLI named by --temporal-cli, or else by
// $WALKEEPER_TEMPORAL_CLI, that is no executable file: devserver.FindCLI would refuse it only
// once the data directory is locked and the log opened, as a failure rather than bad usage.
func checkTemporalCLI(flag string) error {
	name, path := "--temporal-cli", flag
	if path == "" {
		name, path = "$"+devserver.CLIEnv, os.Getenv(devserver.CLIEnv)
	}
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			why = pe.Err.Error() // the path is said once, escaped
		}
	case st.IsDir():
		why = "is a directory"
	case !st.Mode().IsRegular():
		why = "not a regular file"
	case st.Mode()&0o111 == 0:
		why = "not executable"
	default:
		return nil
	}
	return cli.Usagef("%s %s: %s; want the Temporal CLI binary", name, contract.Printable(path), contract.Printable(why))
}

func newDevCmd(g *globalOptions) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything locally: Temporal dev server + Web UI, workers, sweep schedule, demo load",
		Long: `Run a complete local walkeeper:

  1. a Temporal dev server with its Web UI (temporal server start-dev; the Temporal CLI is
     found by --temporal-cli / $WALKEEPER_TEMPORAL_CLI / PATH / GOPATH/bin / .cache/bin,
     or built into .cache/bin on first run), unless --temporal points at a running Temporal;
  2. walkeeper's eight search attributes (WalTarget, WalKind, WalTrigger, WalPending, ...);
  3. --workers in-process workers (instances dev-0, dev-1, ...) sharing the storage
     file://<data>/storage, with HTTP data planes on 127.0.0.1:<http-port>, +1, ...;
  4. the schedule walkeeper-sweep: one SweepWindow workflow an hour, running a sweep round
     every --sweep-every;
  5. with --demo, a demo load: a generic store "demo" gets rows through every worker for
     --demo-duration, sealed every 2s, so merges show up in the Web UI.

Ctrl-C stops the load, seals and stops the workers, then stops the Temporal server.
Temporal's database and log live in <data>/temporal.db and <data>/temporal.log.

dev locks <data> (<data>/dev.lock) before it starts anything: a second dev on the same
directory is refused with the holder's pid, start time and command. While it runs,
<data>/dev.json names its storage, Temporal and Web UI, so status, history, merge, compact
and queries need no flags. The console shows a live summary every few seconds; the full
log is in <data>/walkeeper.log (--verbose prints it on the console too).`,
		Example: `  walkeeper dev
  walkeeper dev --workers 3 --demo=false
  walkeeper dev --temporal 127.0.0.1:7233   # use a Temporal that is already running`,
		Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if o.sweepEvery < contract.MinSweepInterval || o.sweepEvery > contract.MaxSweepInterval {
				return cli.Usagef("--sweep-every %s: want %s to %s", o.sweepEvery, contract.MinSweepInterval, contract.MaxSweepInterval)
			}
			external := cmd.Flags().Changed("temporal")
			if !external {
				if err := checkTemporalCLI(o.cli); err != nil {
					return err
				}
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), g, o, external)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", filepath.Join(".cache", "dev"), "directory for storage, Temporal's database and logs")
	f.IntVar(&o.workers, "workers", 3, "number of in-process workers (1 to 32)")
	f.BoolVar(&o.demo, "demo", true, "run the demo load against generic:demo")
	f.DurationVar(&o.demoDuration, "demo-duration", 30*time.Second, "how long the demo load runs")
	f.DurationVar(&o.sweepEvery, "sweep-every", 10*time.Second, "time between two sweep rounds (the schedule walkeeper-sweep starts one SweepWindow workflow an hour that runs them)")
	f.IntVar(&o.port, "temporal-port", 7233, "Temporal dev server frontend port (a free one if taken)")
	f.IntVar(&o.uiPort, "ui-port", 8233, "Temporal Web UI port (a free one if taken)")
	f.IntVar(&o.httpPort, "http-port", 8081, "HTTP port of worker dev-0; dev-i listens on http-port+i (a free one if taken)")
	f.StringVar(&o.cli, "temporal-cli", "", "Temporal CLI binary to run the dev server (env WALKEEPER_TEMPORAL_CLI)")
	f.BoolVar(&o.verbose, "verbose", false, "print the full log on the console too, not only into <data>/walkeeper.log")
	return cmd
}

func runDev(parent context.Context, out io.Writer, g *globalOptions, o *devOptions, external bool) error {
	tc, err := g.temporalConfig()
	if err != nil {
		return err
	}
	console, err := g.logger("info") // a bad --log-level/--log-format, before anything is locked or started
	if err != nil {
		return err
	}
	ctx, stopSignals := cli.SignalContext(parent)
	defer stopSignals()

	data, err := filepath.Abs(o.data)
	if err != nil {
		return err
	}
	// 0. The data directory, locked before Temporal starts (devlock.go).
	holder := currentHolder()
	lock, err := lockDataDir(data, holder)
	if err != nil {
		return err
	}
	// The lock file stays: removing it would let a process that opened it just before lock a
	// file nobody else sees.
	defer lock.Close()
	// The workers' storage root, checked with the other --data checks: the workers open it only
	// once Temporal has started, and <data> exists now, so only the root itself can be in the way.
	storage := (&url.URL{Scheme: "file", Path: filepath.Join(data, "storage")}).String()
	if err := objstore.CheckURL(ctx, storage); err != nil {
		if errors.Is(err, objstore.ErrInvalidInput) {
			return cli.Usagef("--data %s: %s: not a directory", contract.Printable(data), contract.Printable(filepath.Join(data, "storage")))
		}
		return err
	}
	logger, logPath, closeLog, err := devLogger(console, g.logLevel, data, o.verbose)
	if err != nil {
		return err
	}
	defer closeLog()

	// 1. Temporal.
	uiURL := ""
	if !external {
		srv, err := devserver.Start(ctx, devserver.Options{
			CLIPath:  o.cli,
			Install:  true,
			DataDir:  data,
			Port:     portOrFree(o.port),
			UIPort:   portOrFree(o.uiPort),
			Progress: out,
		})
		if errors.Is(err, proc.ErrNotRegular) {
			return cli.Usagef("dev %w; remove it, or pass --data DIR", printable(err)) // its temporal.log
		}
		if err != nil {
			logger.Error("start temporal dev server", zap.Error(err))
			return devServerError(err, data)
		}
		defer func() {
			fmt.Fprintln(out, "stopping Temporal dev server...")
			if err := srv.Stop(); err != nil {
				logger.Warn("stop temporal dev server", zap.Error(err))
			}
		}()
		tc.Config = temporaladmin.Config{HostPort: srv.HostPort(), Namespace: temporaladmin.DefaultNamespace, MetricsHandler: tc.MetricsHandler}
		uiURL = srv.UIURL()
	}
	c, err := temporaladmin.Dial(ctx, tc.Config, logger)
	if err != nil {
		return err
	}
	defer c.Close()

	// 2. Search attributes (a no-op on our dev server, needed on an external one), and 4. the
	// sweep schedule below, retried as a starting worker retries them: a Temporal on a busy
	// machine answers late at first.
	retrying := func(err error) {
		logger.Warn("Temporal is not answering yet, retrying", zap.Error(err))
	}
	if err := temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, retrying, func(ctx context.Context) error {
		return temporaladmin.EnsureSearchAttributes(ctx, c, tc.Namespace)
	}); err != nil {
		return err
	}

	// 3. Workers.
	var workers []*worker.Worker
	defer func() {
		if len(workers) == 0 {
			return
		}
		fmt.Fprintln(out, "stopping workers (sealing memtables)...")
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := w.Stop(sctx); err != nil {
					logger.Warn("stop worker", zap.Error(err))
				}
			})
		}
		wg.Wait()
	}()
	var httpURLs []string
	for i := 0; i < o.workers; i++ {
		cfg := devWorkerConfig(g, tc, storage, i, o)
		// The dev server walkeeper starts has fairness on (devserver.TunedDynamicConfig); an
		// external one is probed, once, by the first worker.
		cfg.FairnessProbe = external && i == 0
		w, err := worker.New(cfg, logger, c)
		if err != nil {
			return fmt.Errorf("worker %s: %w", cfg.Instance, err)
		}
		if err := w.Start(ctx); err != nil {
			return fmt.Errorf("start worker %s: %w", cfg.Instance, err)
		}
		workers = append(workers, w)
		httpURLs = append(httpURLs, "http://"+w.HTTPAddr())
	}

	// 4. The sweep schedule.
	if err := temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, retrying, func(ctx context.Context) error {
		return temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{Every: o.sweepEvery, Jitter: temporaladmin.DefaultScheduleJitter})
	}); err != nil {
		return err
	}

	st := devState{lockHolder: holder, Storage: storage, Temporal: tc.HostPort, Namespace: tc.Namespace,
		UI: uiURL, HTTP: httpURLs, TemporalCLI: "temporal", Log: logPath}
	if p, err := devserver.FindCLI(o.cli); err == nil {
		st.TemporalCLI = p // the banner names the CLI by its full path when known
	}
	printDevBanner(out, st, data, workers, o)
	if err := writeDevState(data, st); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(data, devStateFile))
	if !o.verbose {
		// The console's own read-only view of the storage, so that the summary never makes a
		// worker's DB hold stores it does not serve.
		if sdb, err := openStorage(ctx, storage, "walkeeper-dev-console", logger, store.DefaultOptions()); err == nil {
			defer func() { _ = sdb.Close(context.Background()) }()
			go newDevConsole(out, c, sdb, uiURL).run(ctx)
		} else {
			logger.Warn("dev console: open storage", zap.Error(err))
		}
	}

	// 5. Demo load.
	var demo sync.WaitGroup
	if o.demo {
		lg := &loadGen{urls: httpURLs, target: store.Target{Kind: store.KindGeneric, Name: "demo"}, rate: 200, batch: 20,
			keySpace: 2000, flushEvery: 2 * time.Second, duration: o.demoDuration, out: out}
		demo.Go(func() {
			if err := lg.create(ctx); err != nil {
				fmt.Fprintf(out, "demo: %v\n", err)
				return
			}
			fmt.Fprintf(out, "demo: appending to generic:demo for %s...\n", o.demoDuration)
			if err := lg.run(ctx); err != nil {
				fmt.Fprintf(out, "demo: %v\n", err)
			}
			if ctx.Err() == nil {
				fmt.Fprintf(out, "demo: done, %d rows appended, %d seals; merges run by count trigger and sweep.\n"+
					"      walkeeper status generic:demo; walkeeper history generic:demo\n",
					lg.appended.Load(), lg.flushes.Load())
			}
		})
	}

	<-ctx.Done()
	forceExitOnSecondSignal(out)
	fmt.Fprintln(out, "\nshutting down...")
	demo.Wait()
	if errors.Is(parent.Err(), context.Canceled) {
		return parent.Err()
	}
	return nil
}

// forceExitOnSecondSignal exits at once on a SIGINT/SIGTERM more than a second after the one
// that started the shutdown (one sent to the process and its group arrives twice at once).
func forceExitOnSecondSignal(out io.Writer) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	first := time.Now()
	go func() {
		for range ch {
			if time.Since(first) > time.Second {
				fmt.Fprintln(out, "second interrupt: exiting without a clean shutdown")
				os.Exit(cli.ExitFailure)
			}
		}
	}()
}

// devWorkerConfig is the configuration of in-process worker i.
func devWorkerConfig(g *globalOptions, tc worker.TemporalConfig, storage string, i int, o *devOptions) worker.Config {
	cfg := worker.DefaultConfig()
	cfg.Instance = "dev-" + strconv.Itoa(i)
	cfg.Storage = storage
	cfg.Temporal = tc
	// A taken port is replaced with a free one, as the Temporal ports are; the banner shows
	// the address the worker really listens on.
	cfg.Listen = proc.Addr(portOrFree(o.httpPort + i))
	cfg.LogFormat = g.logFormat
	cfg.LogLevel = cmp.Or(g.logLevel, cfg.LogLevel)
	// Small, visible merges in the demo: a merge starts after a handful of seals.
	cfg.MergeAfterGenerations = 4
	cfg.FlushInterval = 2 * time.Second
	cfg.MergeBudgetBytes = 256 << 20
	// runDev ensures the sweep schedule once for all workers.
	cfg.SweepInterval = 0
	return cfg
}

func printDevBanner(out io.Writer, st devState, data string, workers []*worker.Worker, o *devOptions) {
	fmt.Fprintln(out)
	fmt.Fprintln(out, "walkeeper dev is running")
	fmt.Fprintf(out, "  Temporal         %s (namespace %s)\n", st.Temporal, st.Namespace)
	if st.UI != "" {
		fmt.Fprintf(out, "  Temporal Web UI  %s\n", st.UI)
		if o.demo {
			fmt.Fprintf(out, "  demo merges      %s\n", uiLinks{base: st.UI, namespace: st.Namespace}.list(`WalTarget="generic:demo"`))
		}
	}
	for i, w := range workers {
		fmt.Fprintf(out, "  worker dev-%d     %s  (shard %s)\n", i, st.HTTP[i], w.DB().Shard())
	}
	fmt.Fprintf(out, "  storage          %s\n", st.Storage)
	if st.UI != "" {
		fmt.Fprintf(out, "  Temporal log     %s\n", contract.Printable(filepath.Join(data, devTemporalLogFile)))
	}
	fmt.Fprintf(out, "  schedule         %s\n", temporaladmin.SweepScheduleID)
	if len(st.HTTP) > 0 {
		if o.demo {
			fmt.Fprintf(out, "  try              curl -s %s/api/v1/stores/generic/demo/stats\n", st.HTTP[0])
		} else {
			fmt.Fprintf(out, "  try              curl -s %s/api/v1/stores\n", st.HTTP[0])
		}
	}
	logNote := " (--verbose to see it here)"
	if o.verbose {
		logNote = " (and on this console)"
	}
	fmt.Fprintf(out, "  walkeeper log    %s%s\n", contract.Printable(st.Log), logNote)
	fmt.Fprintf(out, "  temporal CLI     %s workflow list --address %s --query 'WalTarget=\"generic:demo\"'\n", contract.Printable(st.TemporalCLI), st.Temporal)
	fmt.Fprintln(out, "  from a terminal  walkeeper status | walkeeper history generic:demo | walkeeper queries")
	fmt.Fprintln(out, "Ctrl-C stops everything.")
	fmt.Fprintln(out)
}

// portOrFree returns p if it can be bound on 127.0.0.1 now, else 0 (= pick a free one); a p
// of 0 binds a free port, and stays 0.
func portOrFree(p int) int {
	l, err := net.Listen("tcp", proc.Addr(p))
	if err != nil {
		return 0
	}
	_ = l.Close()
	return p
}
