package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Child processes are the test binary itself, re-executed with -test.run pointing at the
// dispatcher test (TestReliabilityChild) and the mode and argument in the environment.
const (
	ChildModeEnv = "WALKEEPER_RELIABILITY_CHILD"
	ChildArgEnv  = "WALKEEPER_RELIABILITY_ARG"
	// ChildDispatcher is the test that runs child modes.
	ChildDispatcher = "TestReliabilityChild"
)

// ChildResult is how a child process ended.
type ChildResult struct {
	ExitCode int
	Killed   bool // ended by SIGKILL (our crash injection or the parent)
	Stdout   string
	Stderr   string
	Duration time.Duration
}

func (r ChildResult) String() string {
	return fmt.Sprintf("exit=%d killed=%v after %s\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Killed, r.Duration.Round(time.Millisecond), tail(r.Stdout, 4000), tail(r.Stderr, 4000))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Child is a started child process.
type Child struct {
	Cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
}

// StartChild starts the test binary in mode with arg (JSON-encoded) and extra environment.
func StartChild(ctx context.Context, mode string, arg any, env map[string]string) (*Child, error) {
	raw, err := json.Marshal(arg)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	c := &Child{}
	c.Cmd = exec.CommandContext(ctx, exe, "-test.run=^"+ChildDispatcher+"$", "-test.count=1", "-test.timeout=30m", "-test.v")
	c.Cmd.Env = append(os.Environ(), ChildModeEnv+"="+mode, ChildArgEnv+"="+string(raw))
	for k, v := range env {
		c.Cmd.Env = append(c.Cmd.Env, k+"="+v)
	}
	c.Cmd.Stdout, c.Cmd.Stderr = &c.stdout, &c.stderr
	c.Cmd.Cancel = func() error { return c.Cmd.Process.Signal(syscall.SIGKILL) }
	c.start = time.Now()
	if err := c.Cmd.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// Wait waits for the child and reports how it ended. A non-zero exit is not an error here:
// the caller decides what it expected.
func (c *Child) Wait() (ChildResult, error) {
	err := c.Cmd.Wait()
	res := ChildResult{Stdout: c.stdout.String(), Stderr: c.stderr.String(), Duration: time.Since(c.start)}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, err
	}
	st := c.Cmd.ProcessState
	res.ExitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		res.Killed = true
	}
	return res, nil
}

// RunChild starts a child and waits for it.
func RunChild(ctx context.Context, mode string, arg any, env map[string]string) (ChildResult, error) {
	c, err := StartChild(ctx, mode, arg, env)
	if err != nil {
		return ChildResult{}, err
	}
	return c.Wait()
}

// KillSelf ends the current process with SIGKILL at once: no deferred calls, no flushing,
// no Close — what a crash or an OOM kill leaves behind.
func KillSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is delivered asynchronously; never return into the caller
}

// WriteJSONFile writes v atomically (temp file + rename), so a reader never sees half of it
// even if the writer is killed.
func WriteJSONFile(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadJSONFile reads what WriteJSONFile wrote; os.ErrNotExist if absent.
func ReadJSONFile(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
