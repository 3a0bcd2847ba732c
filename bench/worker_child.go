package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// workerChild is a worker child process (fleet-worker, hostile): it prints a line holding
// `"ready":true` when it serves and stops gracefully when its stdin closes.
type workerChild struct {
	proc *os.Process
	procRSS
	ready  workerChildReady
	stdin  io.WriteCloser
	stderr *devserver.TailBuffer
	done   chan struct{}
	once   sync.Once
}

// workerChildReadyWait bounds the child's start-up.
const workerChildReadyWait = 2 * time.Minute

// startWorkerChild re-executes the bench as scenario's child half with params, and waits for
// its ready line and reads it.
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
	ch.proc, ch.procRSS = cmd.Process, procRSS(cmd.Process.Pid)
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
		if err := json.Unmarshal(line, &ch.ready); err != nil || ch.ready.Addr == "" {
			ch.stop()
			return nil, fmt.Errorf("%s child: bad ready line %q: %v", scenario, line, err)
		}
	case <-time.After(workerChildReadyWait):
		ch.kill()
		return nil, fmt.Errorf("%s child not ready within %s", scenario, workerChildReadyWait)
	}
	return ch, nil
}

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

// workerChildParams configure a worker child: worker flags set by name (Knobs) over the
// defaults.
type workerChildParams struct {
	URL      string            `json:"url"`
	Instance string            `json:"instance"`
	Knobs    map[string]string `json:"knobs"`
}

// workerChildReady is a worker child's ready line.
type workerChildReady struct {
	Ready bool         `json:"ready"`
	Addr  string       `json:"addr"`
	Knobs hostileKnobs `json:"knobs"`
}

// workerChildHalf is the child half of fleet-worker and hostile: one worker configured through the
// flag table of `walkeeper worker` until the parent closes stdin.
func workerChildHalf(ctx context.Context, _ Options) error {
	var p workerChildParams
	if err := childParams("worker", &p); err != nil {
		return err
	}
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	set := map[string]string{"instance": p.Instance, "storage": p.URL, "listen": "127.0.0.1:0"}
	maps.Copy(set, p.Knobs)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := fs.Set(k, set[k]); err != nil {
			return fmt.Errorf("worker child: --%s=%s: %w", k, set[k], err)
		}
	}
	ready := workerChildReady{Ready: true, Knobs: reportedKnobs(fs)}
	// Warnings and errors go to stderr, which the parent keeps the tail of for its errors.
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(os.Stderr), zapcore.WarnLevel))
	var c client.Client
	if p.Knobs["temporal"] != "" {
		if err := cfg.Validate(); err != nil {
			return err
		}
		var err error
		if c, err = temporaladmin.Dial(ctx, cfg.Temporal.Config, logger); err != nil {
			return err
		}
		defer c.Close()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	return worker.Run(ctx, cfg, logger, c, func(w *worker.Worker) {
		ready.Addr = w.HTTPAddr()
		_ = childPrint(ready)
	})
}

// reportedKnobs is what a worker child reports of its configuration: the values of
// hostileReportedKnobs in fs, its parsed flags.
func reportedKnobs(fs *pflag.FlagSet) hostileKnobs {
	k := hostileKnobs{}
	for _, name := range hostileReportedKnobs {
		k[name] = fs.Lookup(name).Value.String()
	}
	return k
}
