// Command walkeeper-bench runs walkeeper's benchmark scenarios (package bench,
// docs/BENCHMARKS.md): each one measures walkeeper and its comparison side by side in one run
// and writes markdown to stdout, progress to stderr and JSON, CSV and PNG files to --out.
//
// It is its own binary so that the production binary, cmd/walkeeper, links neither the
// scenarios nor the plotting library (test/lint checks that it stays so).
//
// Exit status: 0 on success, 1 on failure, 2 on bad usage.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/walkeeper/walkeeper/internal/cli"
)

func main() { cli.Main(run) }

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	_, err := cli.Execute(ctx, newRootCmd(), args, stdout, stderr)
	if err == nil {
		return cli.ExitOK
	}
	if cli.IsUsageError(err) {
		fmt.Fprintf(stderr, "walkeeper-bench: %v\nRun 'walkeeper-bench --help' for usage.\n", err)
		return cli.ExitUsage
	}
	fmt.Fprintf(stderr, "walkeeper-bench: %v\n", err)
	return cli.ExitFailure
}
