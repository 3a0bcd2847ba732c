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
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, as for walkeeper.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if isUsageError(err) {
		fmt.Fprintf(stderr, "walkeeper-bench: %v\nRun 'walkeeper-bench --help' for usage.\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "walkeeper-bench: %v\n", err)
	return exitFailure
}

// usageError marks a bad command line (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func isUsageError(err error) bool {
	var ue usageError
	if errors.As(err, &ue) {
		return true
	}
	// Errors cobra produces itself before RunE.
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// args wraps a cobra positional-argument check so that its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// signalContext is ctx cancelled on SIGINT or SIGTERM.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
