// Command walkeeper keeps MemWAL stores healthy: it runs workers that serve the data plane
// and merge write-ahead-log generations into base tables as Temporal workflows, and talks to
// Temporal to start, inspect and schedule those merges.
//
// Exit status: 0 on success, 1 on failure, 2 on bad usage.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walkeeper/walkeeper/internal/cli"
)

func main() { cli.Main(run) }

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, err := cli.Execute(ctx, newRootCmd(), args, stdout, stderr)
	if err == nil {
		return cli.ExitOK
	}
	// One line per error (errfmt.go); a bad command line also says where help is.
	line := errorLine(err)
	if cli.IsUsageError(err) && cmd != nil {
		line += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
	}
	fmt.Fprintf(stderr, "walkeeper: %s\n", line)
	return exitCodeOf(err)
}

func newRootCmd() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "walkeeper",
		Short: "Keep MemWAL stores healthy: durable WAL merges on Temporal",
		Long: `walkeeper keeps MemWAL stores healthy. Writers append rows to LSM stores on object
storage; every flushed write-ahead-log generation stays pending until a merge folds it into
the store's base table. walkeeper runs every merge as a durable Temporal workflow
(MergeWal, one per target, ID merge-wal/<kind>/<name>), sweeps all stores on a Temporal
Schedule, and serves an HTTP data plane from each worker.

A target is <kind>:<name>, e.g. generic:demo (kinds: rollout, generic, datagen).

Start everything locally (Temporal dev server with Web UI, workers, demo load):
  walkeeper dev`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return cli.Usage(err) })
	g.register(root.PersistentFlags())
	root.AddCommand(
		newDevCmd(g),
		newWorkerCmd(),
		newMergeCmd(g),
		newCompactCmd(g),
		newStatusCmd(g),
		newHistoryCmd(g),
		newQueriesCmd(g),
		newScheduleCmd(g),
		newLoadCmd(),
		newQuarantineCmd(g),
	)
	return root
}

// parentRunE makes a command that only groups sub-commands fail with a usage error when it
// is called without one (or with an unknown one) instead of silently printing help.
func parentRunE(cmd *cobra.Command, a []string) error {
	if len(a) > 0 {
		return cli.Usagef("unknown command %q for %q", a[0], cmd.CommandPath())
	}
	_ = cmd.Help()
	return cli.Usagef("%s needs a sub-command", cmd.CommandPath())
}
