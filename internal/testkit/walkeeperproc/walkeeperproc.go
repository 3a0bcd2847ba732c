// Package walkeeperproc builds the walkeeper binary and runs `walkeeper worker` processes for
// end-to-end tests: real OS processes that a test stops with SIGTERM (a graceful drain, as an
// orchestrator does in a rolling restart) or SIGKILL (a crash).
package walkeeperproc

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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

// FreeAddr is a free loopback host:port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Addr(p)
}

// Worker is one `walkeeper worker --instance Instance --listen Listen Args...` process whose
// output goes to Log (appended, so a restarted instance keeps one log).
type Worker struct {
	Bin, Instance, Listen, Log string
	Args                       []string

	cmd  *exec.Cmd
	done chan struct{}
}

// healthyWithin bounds a start: connecting to Temporal is retried for --temporal-wait.
const healthyWithin = 90 * time.Second

// Start starts the process and returns once /healthz answers 200; it fails t if the
// process exits first or is not healthy in time.
func (w *Worker) Start(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(w.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"worker", "--instance", w.Instance, "--listen", w.Listen}, w.Args...)
	cmd := exec.Command(w.Bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "WALKEEPER_AUTH_TOKEN=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.cmd, w.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); _ = f.Close(); close(done) }(w.done)
	deadline := time.Now().Add(healthyWithin)
	for {
		res, err := http.Get("http://" + w.Listen + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-w.done:
			t.Fatalf("worker %s exited during start; log %s:\n%s", w.Instance, w.Log, TailFile(w.Log))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s not healthy after %s; log:\n%s", w.Instance, healthyWithin, TailFile(w.Log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pid is the running process's id (0 before Start).
func (w *Worker) Pid() int {
	if w.cmd == nil || w.cmd.Process == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// Kill ends the process with SIGKILL and waits for it.
func (w *Worker) Kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
	}
}

// Stop sends SIGTERM and waits up to grace for the process to drain and exit; then it
// kills it. It returns the exit code, or an error if the process had to be killed.
func (w *Worker) Stop(grace time.Duration) (int, error) {
	if w.cmd == nil || w.cmd.Process == nil {
		return 0, nil
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode(), nil
	case <-time.After(grace):
		w.Kill()
		return -1, fmt.Errorf("worker %s did not exit within %s of SIGTERM; killed", w.Instance, grace)
	}
}

// TailFile is the last few KiB of the file at p (for failure messages).
func TailFile(p string) string { return proc.Tail(p, 6000) }
