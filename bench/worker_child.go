package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/walkeeper/walkeeper/internal/devserver"
)

// workerChild is a worker process the bench started: a re-exec of the bench running a
// scenario's child half, which prints one line holding `"ready":true` when it serves and
// stops gracefully when its stdin closes. The scenarios that measure a worker's RSS
// (fleet-worker, hostile) run it so that the RSS is the worker's alone.
type workerChild struct {
	proc *os.Process
	// ready is the child's ready line (JSON).
	ready  []byte
	stdin  io.WriteCloser
	stderr *devserver.TailBuffer
	done   chan struct{}
	once   sync.Once
}

// workerChildReadyWait bounds the child's start-up.
const workerChildReadyWait = 2 * time.Minute

// startWorkerChild re-executes the bench as scenario's child half with params, and waits for
// its ready line.
func startWorkerChild(ctx context.Context, o Options, scenario string, params any) (*workerChild, error) {
	cmd, err := childCmd(ctx, o, scenario, params)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch := &workerChild{stdin: stdin, stderr: devserver.NewTailBuffer(8 << 10), done: make(chan struct{})}
	cmd.Stderr = ch.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch.proc = cmd.Process
	ready := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var line []byte
		for sc.Scan() {
			if line == nil && strings.Contains(sc.Text(), `"ready":true`) {
				line = append([]byte(nil), sc.Bytes()...)
				ready <- line
			}
		}
		if line == nil {
			ready <- nil
		}
		_ = cmd.Wait()
		close(ch.done)
	}()
	select {
	case line := <-ready:
		if line == nil {
			<-ch.done
			return nil, fmt.Errorf("%s child exited before it was ready:\n%s", scenario, lastLines(ch.stderr.String(), 20))
		}
		ch.ready = line
	case <-time.After(workerChildReadyWait):
		ch.kill()
		return nil, fmt.Errorf("%s child not ready within %s", scenario, workerChildReadyWait)
	}
	return ch, nil
}

// resetPeak resets the child's VmHWM to its current RSS and returns that RSS.
func (c *workerChild) resetPeak() int64 {
	resetPeakRSSOf(c.proc.Pid)
	return c.rss()
}

// peak is the child's VmHWM: its largest RSS since start or the last resetPeak.
func (c *workerChild) peak() int64 { return procStatus(c.proc.Pid, "VmHWM") }

func (c *workerChild) rss() int64 { return procStatus(c.proc.Pid, "VmRSS") }

// exited reports whether the child has exited.
func (c *workerChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop closes the child's stdin (it stops gracefully) and waits for it, killing it after a
// minute; once.
func (c *workerChild) stop() {
	c.once.Do(func() {
		_ = c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			_ = c.proc.Kill()
			<-c.done
		}
	})
}

// kill ends the child at once and waits for it.
func (c *workerChild) kill() {
	c.once.Do(func() {
		_ = c.proc.Kill()
		<-c.done
	})
}
