// Package walkeeperproc builds the walkeeper binary and runs `walkeeper worker` processes for
// end-to-end tests: real OS processes that a test stops with SIGTERM (a graceful drain, as an
// orchestrator does in a rolling restart) or SIGKILL (a crash).
package walkeeperproc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// buildTimeout bounds one `go build` on a loaded machine with a cold cache.
const buildTimeout = 10 * time.Minute

// EnvBuildGOGC is the GOGC of the go commands a test runs (Go): scripts/test-exec.sh sets it
// to the GOGC of the run's own builds, which it takes back from the test binary itself.
const EnvBuildGOGC = "WALKEEPER_BUILD_GOGC"

// EnvBinary names a walkeeper binary already built from this tree (scripts/test.sh builds one
// per run) that Build links to, where each of about ten packages would link its own (5 to 10
// CPU-seconds each).
const EnvBinary = "WALKEEPER_TEST_BINARY"

// Build runs `go build -ldflags=-w <flags> -o out ./cmd/walkeeper` in the module root (through
// Go) and returns out. flags are extra build flags (e.g. "-overlay", file). The binary has no
// DWARF: stack traces do not read it, and the link costs about 30 % less CPU. Without flags and
// with $EnvBinary set, out is a symbolic link to that binary instead.
func Build(out string, flags ...string) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" && len(flags) == 0 {
		if !cachebin.IsExecutable(p) {
			return "", fmt.Errorf("%s=%s: not an executable file", EnvBinary, p)
		}
		if err := os.Symlink(p, out); err != nil {
			return "", err
		}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := append(append([]string{"build", "-ldflags=-w"}, flags...), "-o", out, "./cmd/walkeeper")
	if buf, err := Go(ctx, args...); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, buf)
	}
	return out, nil
}

// Go runs `go args...` in the module root and returns its combined output. Only one such
// command of a module root runs at a time, across processes: test packages run side by
// side (and CI runs some of them twice, on two Temporal servers) build the same binaries, and
// two identical builds at once each compile everything, where the second one after the first
// finds it all in the build cache.
func Go(ctx context.Context, args ...string) ([]byte, error) {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		return nil, err
	}
	return goIn(ctx, root, args...)
}

// goIn is Go in root, one at a time per root.
func goIn(ctx context.Context, root string, args ...string) ([]byte, error) {
	unlock, err := lockBuilds(ctx, root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return goCommand(ctx, root, args...).CombinedOutput()
}

// goCommand is `go args...` in root, at the build GOGC when EnvBuildGOGC is set.
func goCommand(ctx context.Context, root string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if g := os.Getenv(EnvBuildGOGC); g != "" {
		cmd.Env = append(os.Environ(), "GOGC="+g)
	}
	return cmd
}

// lockBuilds takes the module root's build lock: a file lock in the temporary directory,
// named by a hash of root so that two checkouts build at once. A process that dies drops it.
func lockBuilds(ctx context.Context, root string) (func(), error) {
	sum := sha256.Sum256([]byte(root))
	return proc.LockFile(ctx, filepath.Join(os.TempDir(), fmt.Sprintf("walkeeper-build-%x.lock", sum[:8])))
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
		port, err := testbin.FreePort()
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
	if err := testbin.WaitHTTP(p, "http://"+w.Listen+"/healthz", healthyWithin); err != nil {
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
