package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// The scenarios that measure a process's memory re-execute the bench (Options.Reexec) as their
// child half, its parameters as JSON in childParamsEnv.
const childParamsEnv = "WALKEEPER_BENCH_CHILD_PARAMS"

// childCmd runs scenario's child half with params and extra environment entries.
func childCmd(ctx context.Context, o Options, scenario string, params any, extra ...string) (*exec.Cmd, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	cmd := o.Reexec(ctx, scenario)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(append(cmd.Env, childParamsEnv+"="+string(raw)), extra...)
	return cmd, nil
}

// childParams reads the child half's parameters into p.
func childParams(scenario string, p any) error {
	if err := json.Unmarshal([]byte(os.Getenv(childParamsEnv)), p); err != nil {
		return fmt.Errorf("%s child: bad %s: %w", scenario, childParamsEnv, err)
	}
	return nil
}

// childPrint writes v as one JSON line to the parent: the child's stdout.
func childPrint(v any) error { return json.NewEncoder(os.Stdout).Encode(v) }

// procRSS is a process (its pid) whose RSS a scenario reads from /proc.
type procRSS int

func (p procRSS) rss() int64 { return p.status("VmRSS") }

// peak is the process's VmHWM: its largest RSS since it started or the last resetPeak.
func (p procRSS) peak() int64 { return p.status("VmHWM") }

// resetPeak resets VmHWM to the current RSS (Linux ≥ 4.0: 5 to /proc/<pid>/clear_refs), and returns
// it.
func (p procRSS) resetPeak() int64 {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0o644)
	return p.rss()
}

// status reads a "kB" field of /proc/<pid>/status in bytes (0 if unavailable).
func (p procRSS) status(field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kB int64
			_, _ = fmt.Sscan(rest, &kB)
			return kB << 10
		}
	}
	return 0
}

// rssSpan is a process's RSS when a phase began (the peak reset to it) and its peak by the end.
type rssSpan struct{ Before, Peak int64 }

func (r rssSpan) growth() int64 { return max(r.Peak-r.Before, 0) }

func lastJSONLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(bytes.TrimSpace(lines[i]), []byte("{")) {
			return lines[i]
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// workerChild is a worker child process (fleet-worker, hostile): it prints a line holding
// `"ready":true` when it serves and stops gracefully when its stdin closes.
type workerChild struct {
	proc *os.Process
	procRSS
	ready  workerChildReady
	stdin  io.WriteCloser
	stderr *proc.TailBuffer
	done   chan struct{}
	once   sync.Once
}

// workerChildReadyWait bounds the child's start-up.
const workerChildReadyWait = 2 * time.Minute

// startWorkerChild re-executes the bench as scenario's child half and reads its ready line.
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
	ch := &workerChild{stdin: stdin, stderr: proc.NewTailBuffer(8 << 10), done: make(chan struct{})}
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

func (c *workerChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop closes the child's stdin and waits for it to stop, killing it after a minute; once.
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

// workerChildParams set worker flags by name (Knobs) over the defaults.
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
	return worker.Run(ctx, cfg, logger, c, nil, func(w *worker.Worker) {
		ready.Addr = w.HTTPAddr()
		_ = childPrint(ready)
	})
}

// reportedKnobs are the values of hostileReportedKnobs in fs, a child's parsed flags.
func reportedKnobs(fs *pflag.FlagSet) hostileKnobs {
	k := hostileKnobs{}
	for _, name := range hostileReportedKnobs {
		k[name] = fs.Lookup(name).Value.String()
	}
	return k
}
