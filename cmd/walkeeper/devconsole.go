package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// `walkeeper dev` is calm by default: the full log goes to <data>/walkeeper.log and the
// console shows a short live summary; --verbose sends the log to the console as well.

const (
	devLogFile = "walkeeper.log"
	// devTemporalLogFile receives the Temporal dev server's output (internal/devserver).
	devTemporalLogFile = "temporal.log"
	// devSummaryEvery is how often the console summary is refreshed.
	devSummaryEvery = 3 * time.Second
	// devSummaryMaxStores bounds the stores whose pending generations the summary adds up.
	devSummaryMaxStores = 50
)

// devLogger is the logger of `walkeeper dev`: into <data>/walkeeper.log always, at level (valid:
// console was built with it), and to console too when verbose. close flushes and closes the file.
// A log file that is a symlink or not a regular file is bad usage, rather than waited on (a
// FIFO) or written through.
func devLogger(console *zap.Logger, level, data string, verbose bool) (logger *zap.Logger, path string, close func(), err error) {
	path = filepath.Join(data, devLogFile)
	f, err := proc.OpenRegular(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if errors.Is(err, proc.ErrNotRegular) {
		return nil, "", nil, cli.Usagef("dev log %s: %w; remove it, or pass --data DIR", contract.Printable(path), printable(err))
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("dev log: %w", printable(err))
	}
	logger, _ = worker.NewLogger(f, worker.LogFormatJSON, level)
	if verbose {
		fileCore := logger.Core()
		logger = console.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, fileCore) }))
	}
	return logger, path, func() { _ = logger.Sync(); _ = f.Close() }, nil
}

// devConsole prints the live summary of a running dev.
type devConsole struct {
	out   io.Writer
	tty   bool // rewrite one line in place instead of printing a new one
	c     client.Client
	db    *store.DB // a read-only view of the dev's storage
	uiURL string
	last  string
}

func newDevConsole(out io.Writer, c client.Client, db *store.DB, uiURL string) *devConsole {
	return &devConsole{out: out, tty: isTerminal(out), c: c, db: db, uiURL: uiURL}
}

// run refreshes the summary until ctx ends. Without a terminal a line is printed only when
// something in it changed besides the clock, so a log of the console stays short.
func (d *devConsole) run(ctx context.Context) {
	t := time.NewTicker(devSummaryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if d.tty && d.last != "" {
				fmt.Fprintln(d.out)
			}
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, devSummaryEvery)
		line, key := d.summary(qctx)
		cancel()
		if ctx.Err() != nil {
			continue
		}
		switch {
		case d.tty:
			fmt.Fprintf(d.out, "\r\033[K%s", line)
		case key != d.last:
			fmt.Fprintln(d.out, line)
		}
		d.last = key
	}
}

// summary is one line: the time, stores, pending, merges done and running, the last merge and
// its age, UI link; key is the line without the time and the age, which change by themselves.
func (d *devConsole) summary(ctx context.Context) (line, key string) {
	merges, mergesKey := d.mergesPart(ctx)
	stores := d.storesPart(ctx)
	ui := ""
	if d.uiURL != "" {
		ui = " | UI " + d.uiURL
	}
	return time.Now().Format("15:04:05") + " | " + stores + " | " + merges + ui, stores + " | " + mergesKey + ui
}

// storesPart adds up the pending generations of the first devSummaryMaxStores stores.
func (d *devConsole) storesPart(ctx context.Context) string {
	page, err := d.db.ListTargets(ctx, store.Kinds, store.Target{}, devSummaryMaxStores)
	if err != nil {
		return "stores ?"
	}
	pending, counted := 0, 0
	for _, info := range page.Stores {
		st, err := targetStats(ctx, d.db, info.Target, shardsPage{}) // the totals alone
		if err != nil {
			continue
		}
		pending += st.TotalPending()
		counted++
	}
	stores, in := strconv.Itoa(len(page.Stores)), ""
	if page.Next.Kind != "" {
		stores += "+"
	}
	if counted < len(page.Stores) || page.Next.Kind != "" {
		in = fmt.Sprintf(" (in %d of them)", counted)
	}
	return fmt.Sprintf("stores %s, pending %d%s", stores, pending, in)
}

// mergesPart is the merges' part of the summary, and the same without the last merge's age.
func (d *devConsole) mergesPart(ctx context.Context) (part, key string) {
	done, err1 := countWorkflows(ctx, d.c, mergeWalRuns+` AND ExecutionStatus="Completed"`)
	running, err2 := countWorkflows(ctx, d.c, mergeWalRuns+` AND ExecutionStatus="Running"`)
	if err1 != nil || err2 != nil {
		return "merges ?", "merges ?"
	}
	s := fmt.Sprintf("merges done %d, running %d", done, running)
	resp, err := d.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query:    mergeWalRuns + ` AND ExecutionStatus!="Running"`,
		PageSize: 1,
	})
	if err != nil || len(resp.GetExecutions()) == 0 {
		return s, s
	}
	e := resp.GetExecutions()[0]
	r := historyRunOf(e, uiLinks{})
	tgt := observedString(e.GetSearchAttributes().GetIndexedFields()[contract.WalTargetName])
	last := fmt.Sprintf("last merge %s %s", orDash(tgt, foreignText), r.Result) // anyone with namespace access sets it
	age := ""
	if r.Close != nil {
		age = fmt.Sprintf(" %s ago", time.Since(*r.Close).Round(time.Second))
	}
	reclaimed := ""
	if r.Reclaimed != nil {
		reclaimed = fmt.Sprintf(", reclaimed %d", *r.Reclaimed)
	}
	return s + " | " + last + age + reclaimed, s + " | " + last + reclaimed
}

// isTerminal reports whether w is a character device (a terminal), not a file or pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// devServerError shortens a failed dev server start to one line; its log file has the rest.
// An error naming a path (an *fs.PathError: a log, the data directory) is one line but for
// the path, and is said whole with it escaped.
func devServerError(err error, data string) error {
	msg := err.Error()
	if errors.As(err, new(*fs.PathError)) {
		msg = contract.Printable(msg)
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSuffix(strings.TrimRight(msg[:i], " :;"), "; output")
	}
	return fmt.Errorf("%s (server output: %s)", contract.Printable(msg), contract.Printable(filepath.Join(data, devTemporalLogFile)))
}
