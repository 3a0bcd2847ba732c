package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/target"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// Errors said once: every failure of a command is printed as one line, "walkeeper: <line>".

// errorLine renders err as one line: our own context, then the innermost cause of a
// Temporal failure chain, with sentinel marks that add nothing ("invalid input: ") and
// repeated segments dropped, and only the first line of a multi-line message.
func errorLine(err error) string {
	msg := err.Error()
	if outer, cause, ok := temporalCause(err); ok {
		// Keep what we said around the Temporal error, replace its text by its cause.
		if i := strings.Index(msg, outer.Error()); i >= 0 {
			msg = msg[:i] + cause
		} else {
			msg = cause
		}
	}
	msg, _, _ = strings.Cut(msg, "\n")
	msg = dedupeSegments(msg)
	// What is left of a name someone else chose (a path, a workflow's text) must not move the
	// terminal's cursor; the messages that name a path escape it whole (printable).
	return contract.Printable(strings.TrimRight(msg, " :;"))
}

// printableError is err said with its control characters escaped, for an error that names a
// path the user gave (an os error names it raw): the path stays whole on the error's one line,
// where a newline in it would cut the line and an escape sequence would reach the terminal.
type printableError struct{ err error }

func (e *printableError) Error() string { return contract.Printable(e.err.Error()) }
func (e *printableError) Unwrap() error { return e.err }

// printable is err, not nil, as a printableError.
func printable(err error) error { return &printableError{err: err} }

// temporalCause finds the outermost Temporal failure in err's chain and says its chain once:
// its failures' messages, outermost first, each dropped when an earlier one contains it, since
// an ApplicationError repeats the Go error's chain as its causes and the wrappers carry only
// ids and types.
func temporalCause(err error) (outer error, cause string, ok bool) {
	for outer = err; outer != nil; outer = errors.Unwrap(outer) {
		if _, failure := failureMessage(outer); failure {
			break
		}
	}
	if outer == nil {
		return nil, "", false
	}
	var said []string
	for e := outer; e != nil; e = errors.Unwrap(e) {
		m, failure := failureMessage(e)
		if !failure {
			// A plain Go error below the failures (in-process, e.g. the test environment):
			// its text includes whatever it wraps.
			m = e.Error()
		}
		if m != "" && !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, m) }) {
			said = append(said, m)
		}
		if !failure {
			break
		}
	}
	if len(said) == 0 {
		return outer, outer.Error(), true
	}
	return outer, strings.Join(said, ": "), true
}

// failureMessage is a Temporal failure's own message without the extras Error() adds, "" for
// the wrapper failures that only carry a cause; failure is false for any other error.
func failureMessage(e error) (msg string, failure bool) {
	switch x := e.(type) {
	case *temporal.ApplicationError, *temporal.TimeoutError, *temporal.ServerError:
		return x.(interface{ Message() string }).Message(), true
	case *temporal.CanceledError, *temporal.TerminatedError, *temporal.PanicError:
		return x.Error(), true
	case *temporal.WorkflowExecutionError, *temporal.ActivityError, *temporal.ChildWorkflowExecutionError:
		return "", true
	}
	return "", false
}

// dedupeSegments drops every ": "-separated segment that repeats an earlier one, and the text
// of target.ErrInvalidInput, which only marks a class for errors.Is, when more follows it.
func dedupeSegments(msg string) string {
	segs := strings.Split(msg, ": ")
	seen := make(map[string]bool, len(segs))
	out := segs[:0]
	for i, s := range segs {
		key := strings.TrimSpace(s)
		if seen[key] || (key == target.ErrInvalidInput.Error() && i < len(segs)-1) {
			continue
		}
		seen[key] = true
		out = append(out, s)
	}
	return strings.Join(out, ": ")
}

// exitCodeOf maps an error to the exit status: 2 for bad usage and bad input (a malformed
// target, a store or schedule that does not exist), 1 for every other failure.
func exitCodeOf(err error) int {
	if cli.IsUsageError(err) || errors.Is(err, target.ErrInvalidInput) ||
		errors.As(err, new(*storeMissingError)) || errors.As(err, new(*scheduleMissingError)) {
		return cli.ExitUsage
	}
	return cli.ExitFailure
}

// unreachableError is a failed dial of tc said in one line: where we looked, the
// transport's own last word (e.g. "connection refused") and what to do about it.
type unreachableError struct {
	tc  worker.TemporalConfig
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach Temporal at %s (namespace %s): %s; start one with 'walkeeper dev' or pass --temporal HOST:PORT",
		e.tc.HostPort, cmp.Or(e.tc.Namespace, temporaladmin.DefaultNamespace), transportCause(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }

// transportCause is the last word of a gRPC dial error, whose text nests the same failure
// several times ("... dial tcp 127.0.0.1:1: connect: connection refused").
func transportCause(err error) string {
	msg, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	msg = strings.TrimRight(msg, `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}
