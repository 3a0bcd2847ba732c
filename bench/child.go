package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The scenarios that measure a process's memory re-execute the bench (Options.Reexec) as their
// child half, its parameters as JSON in childParamsEnv.
const childParamsEnv = "WALKEEPER_BENCH_CHILD_PARAMS"

// childCmd is the command that runs scenario's child half with params, and extra
// environment entries.
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
func childPrint(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", raw)
	return err
}

// procRSS is a process (its pid) whose RSS a scenario reads from /proc.
type procRSS int

func (p procRSS) rss() int64 { return p.status("VmRSS") }

// peak is the process's VmHWM: its largest RSS since it started or the last resetPeak.
func (p procRSS) peak() int64 { return p.status("VmHWM") }

// resetPeak resets VmHWM to the current RSS (Linux ≥ 4.0: 5 to /proc/<pid>/clear_refs), and returns it.
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
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return 0
			}
			v, _ := strconv.ParseInt(fs[0], 10, 64)
			return v << 10
		}
	}
	return 0
}

// rssSpan is a process's RSS over a measured phase: its RSS when the phase began (the peak
// reset to it) and its peak (VmHWM) by the end.
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
