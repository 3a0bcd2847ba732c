package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

func newMergeCmd(g *globalOptions) *cobra.Command {
	var (
		sf       startFlags
		maxGens  int
		maxBytes int64
		parallel bool
	)
	cmd := &cobra.Command{
		Use:   "merge TARGET",
		Short: "Start (or attach to) the MergeWal workflow of a target",
		Long: `Start the MergeWal workflow of TARGET (<kind>:<name>) on Temporal, or attach to the one
already running: its workflow ID is merge-wal/<kind>/<name>, so a target is never merged twice
at once. Prints the workflow and run ID; with --wait, waits for the result and prints it.
Ctrl-C stops waiting, not the merge.`,
		Example: `  walkeeper merge generic:demo
  walkeeper merge generic:demo --wait --max-generations 16`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			// What MergeWal would refuse is refused before the store check and the dial.
			switch {
			case maxGens != 0 && (maxGens < 1 || maxGens > contract.MaxMergeGenerations):
				return cli.Usagef("--max-generations %d: want 0 (no cap) or 1 to %d", maxGens, contract.MaxMergeGenerations)
			case maxBytes != 0 && (maxBytes < contract.MinMergeBytes || maxBytes > contract.MaxMergeBytes):
				return cli.Usagef("--max-bytes %d: want 0 (no cap) or %d to %d", maxBytes, contract.MinMergeBytes, contract.MaxMergeBytes)
			}
			in := contract.MergeWalInput{ParallelPrepare: parallel, Trigger: contract.TriggerCLI, TriggerReason: "walkeeper merge"}
			if cmd.Flags().Changed("max-generations") {
				in.MaxGenerations = &maxGens
			}
			if cmd.Flags().Changed("max-bytes") {
				in.MaxBytes = &maxBytes
			}
			return g.start(cmd, a[0], "MergeWal", sf, func(ctx context.Context, c client.Client, t store.Target) (client.WorkflowRun, error) {
				return contract.StartMergeWal(ctx, c, t, in, contract.RunTimeout(sf.runTimeout))
			})
		},
	}
	sf.register(cmd)
	f := cmd.Flags()
	f.IntVar(&maxGens, "max-generations", 0, "generations one pass takes at most (0 = no cap; default: the worker's --merge-max-generations)")
	f.Int64Var(&maxBytes, "max-bytes", 0, "bytes one pass reads at most (0 = no cap; default: the worker's --merge-max-bytes)")
	f.BoolVar(&parallel, "parallel-prepare", false, "prepare shards in parallel (commits stay serial)")
	return cmd
}

func newCompactCmd(g *globalOptions) *cobra.Command {
	var sf startFlags
	cmd := &cobra.Command{
		Use:   "compact TARGET",
		Short: "Start (or attach to) the CompactBase workflow of a target",
		Long: `Start the CompactBase workflow of TARGET (<kind>:<name>), which rewrites the base table's
runs into fewer runs, or attach to the one already running (workflow ID compact/<kind>/<name>).
With --wait, waits for the result and prints it.`,
		Example: `  walkeeper compact generic:demo --wait`,
		Args:    cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return g.start(cmd, a[0], "CompactBase", sf, func(ctx context.Context, c client.Client, t store.Target) (client.WorkflowRun, error) {
				return contract.StartCompactBase(ctx, c, t, contract.CompactBaseInput{Trigger: contract.TriggerCLI,
					TriggerReason: "walkeeper compact"}, contract.RunTimeout(sf.runTimeout))
			})
		},
	}
	sf.register(cmd)
	return cmd
}

// startFlags are the flags of the commands that start (or attach to) one workflow of a
// target: whether to wait for its result, for how long, and the storage pre-check.
type startFlags struct {
	wait       bool
	timeout    time.Duration
	storage    string
	runTimeout time.Duration
}

func (sf *startFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&sf.wait, "wait", false, "wait for the workflow result and print it")
	f.DurationVar(&sf.timeout, "timeout", 0, "give up waiting after this long (0 = no limit; the workflow keeps running)")
	worker.StringKnobVar(f, &sf.storage, "storage", "",
		"storage root URL, read to refuse a store that does not exist before starting; default: the running dev's")
	f.DurationVar(&sf.runTimeout, "merge-run-timeout", contract.DefaultMergeRunTimeout,
		"run timeout of the started run: if it cannot finish, Temporal ends it and the next trigger starts a fresh one (10s to 168h)")
}

// start checks that the store of target (<kind>:<name>) exists, starts (or attaches to) its
// typ workflow and reports the run, waiting for its result if sf asks to; Ctrl-C stops the
// wait, not the workflow.
func (g *globalOptions) start(cmd *cobra.Command, target, typ string, sf startFlags,
	startRun func(context.Context, client.Client, store.Target) (client.WorkflowRun, error)) error {
	t, err := parseTarget(target)
	if err != nil {
		return err
	}
	if err := contract.CheckMergeRunTimeout(sf.runTimeout); err != nil {
		return cli.Usagef("--merge-run-timeout: %v", err)
	}
	if sf.timeout < 0 { // else it would mean no limit, as 0 does
		return cli.Usagef("--timeout must not be negative, got %s", sf.timeout)
	}
	ctx, cancel := cli.SignalContext(cmd.Context())
	defer cancel()
	// The store check comes before the dial: a missing store needs no Temporal to be reported.
	if err := g.precheckStore(ctx, sf.storage, g.devDefaults(cmd), t); err != nil {
		return err
	}
	return g.withTemporal(cmd, func(ctx context.Context, c client.Client) error {
		run, err := startRetrying(ctx, cmd.ErrOrStderr(), typ, t, func(ctx context.Context) (client.WorkflowRun, error) { return startRun(ctx, c, t) })
		if err != nil {
			return fmt.Errorf("start %s for %s: %w", typ, t, err)
		}
		return reportRun(ctx, cmd.OutOrStdout(), run, typ, t.String(), sf.wait, sf.timeout)
	})
}

// startRetryWithin bounds how long a command retries a start Temporal did not answer in time.
const startRetryWithin = 30 * time.Second

// startRetrying runs startRun, again while Temporal does not answer in time, for up to
// startRetryWithin, saying so on stderr; a repeated start attaches, so retrying is safe.
func startRetrying(ctx context.Context, stderr io.Writer, typ string, t store.Target, startRun func(context.Context) (client.WorkflowRun, error)) (client.WorkflowRun, error) {
	var run client.WorkflowRun
	err := temporaladmin.RetryTransient(ctx, startRetryWithin, func(err error) {
		fmt.Fprintf(stderr, "walkeeper: start %s for %s: %v; retrying\n", typ, t, err)
	}, func(ctx context.Context) error {
		var err error
		run, err = startRun(ctx)
		return err
	})
	return run, err
}

// reportRun prints a started/attached run and, with wait, its JSON result.
func reportRun(ctx context.Context, w io.Writer, run client.WorkflowRun, typ, target string, wait bool, timeout time.Duration) error {
	fmt.Fprintf(w, "%s %s\n  workflow id: %s\n  run id:      %s\n", typ, target, run.GetID(), run.GetRunID())
	if !wait {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var res json.RawMessage
	if err := run.Get(ctx, &res); err != nil {
		// Only the wait ended (read on the clock, as gRPC may answer before ctx.Err() is
		// set): say so, lest it read as a failed run.
		if dl, ok := ctx.Deadline(); ok && timeout > 0 && !time.Now().Before(dl) {
			err = fmt.Errorf("gave up waiting after %s (--timeout); the run goes on", timeout)
		}
		return fmt.Errorf("%s %s (workflow %s, run %s): %w", typ, target, run.GetID(), run.GetRunID(), err)
	}
	fmt.Fprintln(w, "result:")
	return writeJSON(w, res)
}
