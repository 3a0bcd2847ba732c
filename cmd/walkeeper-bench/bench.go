package main

import (
	"context"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/bench"
)

// newRootCmd is `walkeeper-bench <scenario>`: the benchmark scenarios of package bench.
func newRootCmd() *cobra.Command {
	var (
		o          bench.Options
		logLevel   string
		failOnMiss bool
		cpuProfile string
		budgetsMiB []int
		guardMiB   int
	)
	var names []string
	for _, s := range bench.Scenarios {
		names = append(names, fmt.Sprintf("%-18s %s", s.Name, s.Short))
	}
	cmd := &cobra.Command{
		Use:   "walkeeper-bench <scenario>|all|list",
		Short: "Run a benchmark scenario (incident replay, commit lock, append latency, ...)",
		Long: `Run one of walkeeper's benchmark scenarios, measuring walkeeper and its comparison side by
side in the same run. Results (markdown, JSON, CSV, PNG) go to --out; progress goes to stderr
and the summary to stdout. docs/BENCHMARKS.md records real runs.

Scenarios:
  ` + strings.Join(names, "\n  ") + `
  all                run every scenario in this order

--quick runs each scenario's smoke-test size (under 2 minutes each). Scenarios that need Temporal
start a dev server (temporal server start-dev) unless --temporal is given.

This is a separate binary from walkeeper so that the production binary links neither the
scenarios nor the plotting library (docs/decisions/0151-benchmarks-in-their-own-binary.md).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			name := a[0]
			if name == "list" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(names, "\n"))
				return err
			}
			var run []string
			if name == "all" {
				for _, s := range bench.Scenarios {
					run = append(run, s.Name)
				}
			} else if _, ok := bench.Lookup(name); ok {
				run = []string{name}
			} else {
				return cli.Usagef("unknown scenario %q (see 'walkeeper-bench list')", name)
			}
			for _, m := range budgetsMiB {
				if m <= 0 {
					return cli.Usagef("--budgets-mib: %d is not a positive size", m)
				}
				o.MemoryBudgets = append(o.MemoryBudgets, int64(m)<<20)
			}
			if guardMiB < 0 {
				return cli.Usagef("--rss-guard-mib: %d is not a size", guardMiB)
			}
			o.RSSGuard = int64(guardMiB) << 20
			for _, p := range o.MemoryParts {
				if p != "merges" && p != "reads" {
					return cli.Usagef("--parts: unknown part %q (merges, reads)", p)
				}
			}
			// Every fairness target is judged against the unloaded round, the first; each round
			// is reported under its backlog, so no backlog may come twice.
			for i, b := range o.Backlogs {
				if i == 0 && b != 0 {
					return cli.Usagef("--backlogs: the first must be 0, the unloaded round the targets are judged against (got %d)", b)
				}
				if i > 0 && b <= o.Backlogs[i-1] {
					return cli.Usagef("--backlogs: %d after %d: each backlog must be larger than the one before", b, o.Backlogs[i-1])
				}
			}
			if o.Reps < 0 {
				return cli.Usagef("--reps: %d is not a number of repetitions", o.Reps)
			}
			for _, s := range o.FairnessServers {
				if s != "dev" && s != "cluster" {
					return cli.Usagef("--servers: unknown server %q (dev, cluster)", s)
				}
			}
			o.Reexec = func(ctx context.Context, scenario string) *exec.Cmd {
				exe, err := os.Executable()
				if err != nil {
					exe = os.Args[0]
				}
				return exec.CommandContext(ctx, exe, scenario, "--child")
			}
			if o.Child {
				_, err := bench.Run(ctx, name, o)
				return err
			}
			if o.OutDir == "" {
				o.OutDir = filepath.Join("walkeeper-bench-results", time.Now().Format("20060102-150405"))
			}
			if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
				return err
			}
			o.Progress = cmd.ErrOrStderr()
			logger, closeLog, err := benchLogger(filepath.Join(o.OutDir, "walkeeper.log"), logLevel)
			if err != nil {
				return cli.Usage(err)
			}
			defer closeLog()
			o.Logger = logger
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			missed := 0
			for _, n := range run {
				fmt.Fprintf(cmd.ErrOrStderr(), "== bench %s (quick=%v) → %s\n", n, o.Quick, o.OutDir)
				res, err := bench.Run(ctx, n, o)
				if err != nil {
					return fmt.Errorf("bench %s: %w", n, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), res.Markdown())
				for _, t := range res.Targets {
					if !t.Met {
						missed++
					}
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "results in %s\n", o.OutDir)
			if failOnMiss && missed > 0 {
				return fmt.Errorf("%d target(s) missed", missed)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return cli.Usage(err) })
	fs := cmd.Flags()
	fs.StringVar(&o.Temporal, "temporal", "", "host:port of a running Temporal frontend for the scenarios that need one (default: start a dev server)")
	fs.BoolVar(&o.Quick, "quick", false, "smoke-test size: under 2 minutes per scenario")
	fs.StringVar(&o.OutDir, "out", "", "directory for results (markdown, JSON, CSV, PNG, walkeeper.log); default ./walkeeper-bench-results/<time>")
	fs.StringVar(&o.WorkDir, "work-dir", "", "directory for the stores a scenario writes (default: the system temp dir); removed afterwards")
	fs.IntVar(&o.Reps, "reps", 0, "repetitions (default 5, or 1 with --quick; fairness: 1, its sides taking turns to go first)")
	fs.DurationVar(&o.Duration, "duration", 0, "length of each side of the incident replay (default 4m, 40s with --quick)")
	fs.IntVar(&o.Shards, "shards", 0, "incident: number of shards (worker processes) per side (default 20, 4 with --quick)")
	fs.IntVar(&o.Stores, "stores", 0, "incident: rollout stores (default 300, 120 with --quick); temporal-overhead: idle stores to sweep (default 1000)")
	fs.DurationVar(&o.Latency, "latency", 0, "incident, fleet: modelled object-store latency added to every storage request (incident: default 10ms, 25ms with --quick; fleet: 10ms; negative = none)")
	fs.IntSliceVar(&o.Backlogs, "backlogs", nil, "fairness: rollout merges queued ahead of the generic ones, comma-separated, from 0 upwards (default 0,400,2000,10000; 0,50,200 with --quick)")
	fs.StringSliceVar(&o.FairnessServers, "servers", nil, "fairness: Temporal servers to measure, comma-separated: dev (the dev server), cluster (the server on PostgreSQL); default both, dev with --quick")
	fs.BoolVar(&o.NoSticky, "no-sticky", false, "fairness: workers without sticky workflow execution (workflow cache 0), so every workflow task is dispatched fairly")
	fs.IntSliceVar(&o.FleetSizes, "sizes", nil, "fleet: registered stores per fleet, comma-separated (default 10000,100000; 2000,20000 with --quick)")
	fs.StringSliceVar(&o.FleetVariants, "variants", nil, "fleet: start-path variants measured side by side, comma-separated concurrency/batch (starts in flight per StartWorkflows, starts per batch; an empty part = the default), e.g. 16/256,32/512; default the build's defaults")
	fs.IntSliceVar(&budgetsMiB, "budgets-mib", nil, "memory: merge budgets in MiB, comma-separated (default 32; 32,128,1024 in full)")
	fs.StringSliceVar(&o.MemoryParts, "parts", nil, "memory: parts to run, comma-separated: merges, reads; default both")
	fs.IntVar(&guardMiB, "rss-guard-mib", 0, "hostile: kill the worker child when its RSS passes this many MiB (default 8192, 2048 with --quick)")
	fs.IntVar(&o.MergeMaxGenerations, "merge-max-generations", 0, "incident: merge_max_generations of both systems (default 8)")
	fs.StringVar(&logLevel, "log-level", "warn", "level of walkeeper's own log, written to <out>/walkeeper.log")
	fs.BoolVar(&failOnMiss, "fail-on-miss", false, "exit 1 when a target is missed")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fs.BoolVar(&o.Child, "child", false, "run the child half of a scenario (internal)")
	_ = fs.MarkHidden("child")
	return cmd
}

// benchLogger writes JSON logs at level to path.
func benchLogger(path, level string) (*zap.Logger, func(), error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(f), lvl)
	return zap.New(core), func() { _ = f.Sync(); _ = f.Close() }, nil
}
