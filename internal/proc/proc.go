// Package proc runs a server binary as a child process for tests and for the Temporal dev
// server (internal/devserver): in its own process group (so a stop also ends the children it
// forks), with its output in a log file, and with a stop that escalates from a polite signal
// to SIGKILL.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Spec describes one process.
type Spec struct {
	Path string
	Args []string
	Env  []string // appended to Environ
	Log  string   // file that receives stdout and stderr (appended, so restarts keep history)
	// Environ is the environment Env extends (nil: os.Environ()).
	Environ []string
	// Output receives stdout and stderr too; the last 16 KiB are kept for WaitFor's errors.
	Output io.Writer
	// Credential runs the process as another user (PostgreSQL refuses to run as root).
	Credential *syscall.Credential
	// ParentDeath makes the kernel SIGTERM the process if this one dies without stopping it
	// (Linux only), so that a killed test binary or a crashed `walkeeper dev` leaks no server.
	ParentDeath bool
}

// Proc is a started process.
type Proc struct {
	spec   Spec
	cmd    *exec.Cmd
	tail   *TailBuffer
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// Start starts spec's process.
func Start(spec Spec) (*Proc, error) {
	tail := NewTailBuffer(16 << 10)
	out := io.Writer(tail)
	if spec.Output != nil {
		out = io.MultiWriter(spec.Output, tail)
	}
	var log *os.File
	if spec.Log != "" {
		var err error
		if log, err = OpenRegular(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return nil, fmt.Errorf("log %s: %w", spec.Log, err)
		}
		fmt.Fprintf(log, "\n=== %s %s %v\n", time.Now().Format(time.RFC3339), spec.Path, spec.Args)
		out = io.MultiWriter(log, out)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	base := spec.Environ
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = slices.Concat(base, spec.Env)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.Credential}
	if spec.ParentDeath {
		setParentDeathSignal(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close() // a nil *os.File refuses the Close
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	p := &Proc{spec: spec, cmd: cmd, tail: tail, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process id (and process group id).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended (exec.Cmd.Wait's error), once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Output is the last 16 KiB the process wrote to stdout and stderr.
func (p *Proc) Output() string { return p.tail.String() }

// Stop sends sig to the process group, waits up to grace for the process to exit, then
// SIGKILLs the group. It returns nil when the process had exited or exits within grace, an
// error when it took SIGKILL (or survived it 30s); calling it again is harmless.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return fmt.Errorf("%s did not stop within %s of %s; killed", p.spec.Path, grace, sig)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 30s", p.spec.Path, p.cmd.Process.Pid)
	}
}

// FreePorts returns n distinct ports in [10000, 32768) that were free a moment ago, chosen
// at random. They are held open together while being picked, so the n are distinct. They
// come from below the kernel's ephemeral range (from 32768 on Linux): a port released there
// can be taken as the local port of any outgoing connection before the server meant for it
// binds it.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		l, err := net.Listen("tcp", Addr(10000+mrand.IntN(ephemeralStart-10000)))
		if err != nil {
			if tries > 1000 {
				return nil, fmt.Errorf("no %d free ports: %w", n, err)
			}
			continue
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralStart is where Linux's default ephemeral port range (ip_local_port_range) begins.
const ephemeralStart = 32768

// WaitFor polls ready every 100 ms until it returns nil, the process exits (an error with
// the output's tail), ctx ends, or timeout passes (the last error from ready).
func (p *Proc) WaitFor(ctx context.Context, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s: process exited (%v) before it was ready; output:\n%s", p.spec.Path, p.err, p.Output())
		default:
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; output:\n%s", p.spec.Path, timeout, err, p.Output())
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Addr formats 127.0.0.1:port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// TailBuffer keeps the last max bytes written to it: a child process's output, for the
// error that says why it died.
type TailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTailBuffer keeps the last max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// ErrNotRegular is a file that is a symlink or not a regular file where one was expected.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path as os.OpenFile does but refuses a symlink or anything not a regular
// file (ErrNotRegular) without waiting on a FIFO, which a planted one would block.
func OpenRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%w (%v)", ErrNotRegular, err)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w (a %v)", ErrNotRegular, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// LockFile takes an exclusive flock(2) on path, created if missing, waiting until it is free
// or ctx ends; the returned func drops it, and so does the death of the process.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing drops the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
