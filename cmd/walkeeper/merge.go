package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

func newMergeCmd(g *globalOptions) *cobra.Command {
	var (
		wait     bool
		timeout  time.Duration
		maxGens  int
		maxBytes int64
		parallel bool
		storage  string
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
			t, err := parseTarget(a[0])
			if err != nil {
				return err
			}
			in := contract.MergeWalInput{Target: t.String(), ParallelPrepare: parallel,
				Trigger: contract.TriggerCLI, TriggerReason: "walkeeper merge"}
			if flagChanged(cmd.Flags(), "max-generations") {
				in.MaxGenerations = &maxGens
			}
			if flagChanged(cmd.Flags(), "max-bytes") {
				in.MaxBytes = &maxBytes
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			if err := g.precheckStore(ctx, cmd, storage, t); err != nil {
				return err
			}
			c, _, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := contract.StartMergeWal(ctx, c, t, in)
			if err != nil {
				return fmt.Errorf("start MergeWal for %s: %w", t, err)
			}
			return reportRun(ctx, cmd.OutOrStdout(), run, "MergeWal", t.String(), wait, timeout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&wait, "wait", false, "wait for the workflow result and print it")
	f.DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0 = no limit; the workflow keeps running)")
	f.IntVar(&maxGens, "max-generations", 0, "generations one pass takes at most (0 = no cap; default: the workflow's)")
	f.Int64Var(&maxBytes, "max-bytes", 0, "bytes one pass reads at most (0 = no cap; default: the workflow's)")
	f.BoolVar(&parallel, "parallel-prepare", false, "prepare shards in parallel (commits stay serial)")
	registerStorageCheckFlag(cmd, &storage)
	return cmd
}

func newCompactCmd(g *globalOptions) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
		storage string
	)
	cmd := &cobra.Command{
		Use:   "compact TARGET",
		Short: "Start (or attach to) the CompactBase workflow of a target",
		Long: `Start the CompactBase workflow of TARGET (<kind>:<name>), which rewrites the base table's
runs into fewer runs, or attach to the one already running (workflow ID compact/<kind>/<name>).
With --wait, waits for the result and prints it.`,
		Example: `  walkeeper compact generic:demo --wait`,
		Args:    cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			t, err := parseTarget(a[0])
			if err != nil {
				return err
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			if err := g.precheckStore(ctx, cmd, storage, t); err != nil {
				return err
			}
			c, _, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			// INTEGRATION(C): input type of StartCompactBase as pinned in SPEC ("Same StartCompactBase").
			run, err := contract.StartCompactBase(ctx, c, t, contract.CompactBaseInput{Target: t.String(),
				Trigger: contract.TriggerCLI, TriggerReason: "walkeeper compact"})
			if err != nil {
				return fmt.Errorf("start CompactBase for %s: %w", t, err)
			}
			return reportRun(ctx, cmd.OutOrStdout(), run, "CompactBase", t.String(), wait, timeout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&wait, "wait", false, "wait for the workflow result and print it")
	f.DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0 = no limit; the workflow keeps running)")
	registerStorageCheckFlag(cmd, &storage)
	return cmd
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
		return fmt.Errorf("%s %s (workflow %s, run %s): %w", typ, target, run.GetID(), run.GetRunID(), err)
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		out = res
	}
	fmt.Fprintf(w, "result:\n%s\n", out)
	return nil
}
