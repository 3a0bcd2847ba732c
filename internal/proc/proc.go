// Package proc runs a server binary as a child process for tests and for the Temporal dev
// server (internal/devserver): in its own process group (so a stop also ends the children it
// forks), with its output in a log file, and with a stop that escalates from a polite signal
// to SIGKILL.
package proc

import (
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
	// Output receives stdout and stderr too (both nil or "": discarded).
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
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// Start starts spec's process.
func Start(spec Spec) (*Proc, error) {
	var log *os.File
	out := spec.Output
	if spec.Log != "" {
		var err error
		if log, err = os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "\n=== %s %s %v\n", time.Now().Format(time.RFC3339), spec.Path, spec.Args)
		out = log
		if spec.Output != nil {
			out = io.MultiWriter(log, spec.Output)
		}
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
	p := &Proc{spec: spec, cmd: cmd, exited: make(chan struct{})}
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

// Stop sends sig to the process group, waits up to grace for the process to exit, then
// SIGKILLs the group. It returns nil when the process exited (for whatever reason); calling
// it again is harmless.
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

// Tail returns the last n bytes of the process's log file, for error messages.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	if st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
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

// WaitTCP waits until addr accepts a TCP connection, the process exits, or timeout passes.
func (p *Proc) WaitTCP(addr string, timeout time.Duration) error {
	return p.WaitFor(timeout, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// WaitFor polls ready every 100 ms until it returns nil, the process exits (an error with
// the log's tail), or timeout passes (the last error from ready).
func (p *Proc) WaitFor(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s: process exited (%v) before it was ready; log tail:\n%s", p.spec.Path, p.err, Tail(p.spec.Log, 4096))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; log tail:\n%s", p.spec.Path, timeout, err, Tail(p.spec.Log, 4096))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Addr formats 127.0.0.1:port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
