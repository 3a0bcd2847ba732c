// Package cli holds what walkeeper's two commands (cmd/walkeeper and cmd/walkeeper-bench)
// share about their command lines: the exit codes, the usage-error mark that selects exit
// status 2, how a root command runs, and the signal context.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes of both commands.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError marks a bad command line (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error.
func Usage(err error) error { return UsageError{err} }

// Usagef is a usage error with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// IsUsageError reports whether err is a bad command line: marked with UsageError, or one of
// the errors cobra produces itself before RunE.
func IsUsageError(err error) bool {
	if _, ok := errors.AsType[UsageError](err); ok {
		return true
	}
	msg := err.Error()
	return slices.ContainsFunc([]string{"unknown command ", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument "},
		func(p string) bool { return strings.HasPrefix(msg, p) })
}

// Args wraps a cobra positional-argument check so that its failure is a usage error.
func Args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return UsageError{err}
		}
		return nil
	}
}

// Main is both commands' main: run, given this process's command line, returns the exit
// code it exits with.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Execute runs root on args with its output going to stdout and stderr. It returns the command
// that ran (whose CommandPath names its help) and its error.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) (*cobra.Command, error) {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContextC(ctx)
}

// SignalContext is ctx cancelled on SIGINT or SIGTERM.
func SignalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
