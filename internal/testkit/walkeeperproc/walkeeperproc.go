// Package walkeeperproc builds the walkeeper binary and runs `walkeeper worker` processes for
// end-to-end tests: real OS processes that a test stops with SIGTERM (a graceful drain, as an
// orchestrator does in a rolling restart) or SIGKILL (a crash).
package walkeeperproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/proc"
)

// buildTimeout bounds one `go build` on a loaded machine with a cold cache.
const buildTimeout = 10 * time.Minute

// Build runs `go build <flags> -o out ./cmd/walkeeper` in the module root and returns out.
// flags are extra build flags (e.g. "-overlay", file).
func Build(out string, flags ...string) (string, error) {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := append(append([]string{"build"}, flags...), "-o", out, "./cmd/walkeeper")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, buf.String())
	}
	return out, nil
}

// Worker is one `walkeeper worker --instance Instance --listen Listen Args...` process whose
// output goes to Log (appended, so a restarted instance keeps one log). An empty Listen is a
// free loopback port, picked at the first Start and kept for restarts.
type Worker struct {
	Bin, Instance, Listen, Log string
	Args                       []string
	// Env adds environment variables to the test's own.
	Env []string
	// OwnWalkeeperEnv keeps the test's WALKEEPER_* variables from the process, which reads
	// every one of them, so that only Args and Env configure it.
	OwnWalkeeperEnv bool

	p *proc.Proc
}

// healthyWithin bounds a start: connecting to Temporal is retried for --temporal-wait. A
// variable so that a test of a start that never becomes healthy ends soon.
var healthyWithin = 90 * time.Second

// Start starts the process and returns once /healthz answers 200; it fails t if the
// process exits first or is not healthy in time.
func (w *Worker) Start(t testing.TB) {
	t.Helper()
	if w.Listen == "" {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		w.Listen = proc.Addr(port)
	}
	var environ []string
	if w.OwnWalkeeperEnv {
		environ = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "WALKEEPER_") })
	}
	p, err := proc.Start(proc.Spec{
		Path: w.Bin,
		Args: append([]string{"worker", "--instance", w.Instance, "--listen", w.Listen}, w.Args...),
		// A test's worker on a shared machine (race builds most) can hold a workflow task past
		// the SDK's 1 s deadlock detector without a bug; Env may set it back.
		Env:     append([]string{"WALKEEPER_AUTH_TOKEN=", "WALKEEPER_WORKFLOW_DEADLOCK_TIMEOUT=1m"}, w.Env...),
		Environ: environ,
		Log:     w.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.p = p
	// A start that fails kills its process, which would outlive the test binary. No clean-up
	// is registered on t: a worker restarted inside a subtest must outlive that subtest.
	err = p.WaitHTTP("http://"+w.Listen+"/healthz", healthyWithin)
	if err != nil {
		_ = p.Stop(syscall.SIGKILL, time.Minute)
		t.Fatalf("worker %s did not become healthy (log %s): %v", w.Instance, w.Log, err)
	}
}

// Pid is the running process's id (0 before Start).
func (w *Worker) Pid() int {
	if w.p == nil {
		return 0
	}
	return w.p.PID()
}

// Exited is closed when the running process has ended (nil before Start).
func (w *Worker) Exited() <-chan struct{} {
	if w.p == nil {
		return nil
	}
	return w.p.Exited()
}

// Kill ends the process with SIGKILL and waits for it.
func (w *Worker) Kill() {
	if w.p != nil {
		_ = w.p.Stop(syscall.SIGKILL, time.Minute)
	}
}

// Stop sends SIGTERM and waits up to grace for the process to drain and exit; then it
// kills it. It returns the exit code, or an error if the process had to be killed.
func (w *Worker) Stop(grace time.Duration) (int, error) {
	if w.p == nil {
		return 0, nil
	}
	if err := w.p.Stop(syscall.SIGTERM, grace); err != nil {
		return -1, fmt.Errorf("worker %s: %w", w.Instance, err)
	}
	if exit, ok := errors.AsType[*exec.ExitError](w.p.Err()); ok {
		return exit.ExitCode(), nil
	}
	return 0, nil
}

// Output is the last 16 KiB the last process started wrote (for failure messages).
func (w *Worker) Output() string {
	if w.p == nil {
		return ""
	}
	return w.p.Output()
}
