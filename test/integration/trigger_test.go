package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/worker"
)

// triggerStarts reads walkeeper_trigger_starts_total{trigger,result} from w's registry.
func triggerStarts(t *testing.T, w *worker.Worker, trigger, result string) float64 {
	t.Helper()
	mfs, err := w.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "walkeeper_trigger_starts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["trigger"] == trigger && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Count trigger: with merge_after_generations = 3, appends and seals over HTTP take the
// worker's own shard to 3 pending generations; the worker starts MergeWal by itself (the
// test never asks for a merge), the run is findable by its WalTarget search attribute, and
// pending drains to zero.
func TestCountTriggerStartsMerge(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("counter")
	cfg.MergeAfterGenerations = 3
	cfg.FlushInterval = 200 * time.Millisecond
	w := e.startWorker(cfg)
	a := newAPI(t, w.HTTPAddr())
	a.must(201, "POST", "/api/v1/stores/generic/count", genericSchemaJSON, nil)

	id := contract.MergeWalID(mustTarget(t, "generic:count"))
	// Seal one row at a time until a flush reports 3 pending (the flush sweeper may seal
	// some rows first; a merge it triggered then ends the loop too).
	maxPending := 0
	for i := 0; maxPending < 3; i++ {
		if _, err := e.describe(id, ""); err == nil {
			break
		}
		if i >= 20 {
			t.Fatalf("pending never reached 3 after %d seals", i)
		}
		a.must(200, "POST", "/api/v1/stores/generic/count/rows", fmt.Sprintf(`[{"id":"r%d","v":%d}]`, i, i), nil)
		var fl struct {
			Pending int `json:"pending"`
		}
		a.must(200, "POST", "/api/v1/stores/generic/count/flush", nil, &fl)
		maxPending = max(maxPending, fl.Pending)
	}

	var runID string
	waitFor(t, waitShort, "the count trigger to start "+id, func() (bool, error) {
		d, err := e.describe(id, "")
		if err != nil {
			return false, nil // not started yet
		}
		runID = d.WorkflowExecutionInfo.GetExecution().GetRunId()
		return true, nil
	})
	res := e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), id, runID), waitLong)
	if res.Reclaimed < 3 {
		t.Fatalf("triggered merge reclaimed %d generations, want at least 3: %+v", res.Reclaimed, res)
	}
	waitFor(t, waitLong, "pending to drain", func() (bool, error) {
		var st httpStats
		if code := a.call("GET", "/api/v1/stores/generic/count/stats", nil, &st); code != 200 {
			return false, fmt.Errorf("stats: %d", code)
		}
		return st.pending() == 0, nil
	})
	waitFor(t, waitShort, "visibility to find the merge by WalTarget", func() (bool, error) {
		_, n, err := e.listExecutions(`WorkflowType = 'MergeWal' AND WalTarget = 'generic:count' AND WalKind = 'generic'`)
		return n >= 1, err
	})
	if n := triggerStarts(t, w, worker.TriggerCount, worker.ResultStarted); n < 1 {
		t.Errorf("count trigger starts = %v, want at least 1", n)
	}
	if n := triggerStarts(t, w, worker.TriggerHTTP, worker.ResultStarted); n != 0 {
		t.Errorf("HTTP trigger starts = %v: the test never asked for a merge", n)
	}
	rows := a.allRows("generic", "count")
	if len(rows) < 3 {
		t.Fatalf("read %d rows after the merge", len(rows))
	}
}

// Manual trigger over HTTP (POST .../merge-wal?wait=true → 200 with the result) and through
// the walkeeper binary (`walkeeper merge generic:manual --wait` → exit status 0), and with
// the bare Temporal CLI command of docs/DESIGN.md §4, each draining what was pending; a malformed
// target is a usage error (exit status 2).
func TestManualTriggerHTTPAndCLI(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(e.config("manual"))
	a := newAPI(t, w.HTTPAddr())
	a.must(201, "POST", "/api/v1/stores/generic/manual", genericSchemaJSON, nil)
	seal := func(round, n int) {
		for g := range n {
			a.must(200, "POST", "/api/v1/stores/generic/manual/rows", fmt.Sprintf(`[{"id":"r%d-%d","v":1}]`, round, g), nil)
			a.must(200, "POST", "/api/v1/stores/generic/manual/flush", nil, nil)
		}
	}
	pending := func() int {
		var st httpStats
		a.must(200, "GET", "/api/v1/stores/generic/manual/stats", nil, &st)
		return st.pending()
	}

	// HTTP.
	seal(1, 2)
	var out struct {
		WorkflowID string                   `json:"workflow_id"`
		RunID      string                   `json:"run_id"`
		Result     *contract.MergeWalResult `json:"result"`
	}
	a.must(200, "POST", "/api/v1/stores/generic/manual/merge-wal?wait=true", nil, &out)
	if out.WorkflowID != "merge-wal/generic/manual" || out.RunID == "" || out.Result == nil || out.Result.Reclaimed != 2 {
		t.Fatalf("merge-wal?wait=true answered %+v (result %+v)", out, out.Result)
	}
	if p := pending(); p != 0 {
		t.Fatalf("pending after HTTP merge: %d", p)
	}

	// CLI.
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	seal(2, 3)
	stdout, stderr, code := runCLI(t, bin, "merge", "generic:manual", "--wait",
		"--temporal", e.hostPort, "--namespace", e.ns)
	if code != 0 {
		t.Fatalf("walkeeper merge: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "merge-wal/generic/manual") || !strings.Contains(stdout, "result:") {
		t.Fatalf("walkeeper merge printed:\n%s", stdout)
	}
	_, js, _ := strings.Cut(stdout, "result:")
	var res contract.MergeWalResult
	if err := json.Unmarshal([]byte(js), &res); err != nil || res.Reclaimed != 3 {
		t.Fatalf("CLI result %q: %+v (%v), want 3 reclaimed", js, res, err)
	}
	if p := pending(); p != 0 {
		t.Fatalf("pending after CLI merge: %d", p)
	}
	if rows := a.allRows("generic", "manual"); len(rows) != 5 {
		t.Fatalf("read %d rows, want 5", len(rows))
	}

	_, stderr, code = runCLI(t, bin, "merge", "nope:x", "--temporal", e.hostPort, "--namespace", e.ns)
	if code != 2 {
		t.Fatalf("walkeeper merge nope:x: exit %d, want 2 (usage)\n%s", code, stderr)
	}

	// The bare Temporal CLI start of docs/DESIGN.md §4 (no search attributes given): the run
	// merges, and sets WalTarget/WalKind itself so Temporal Web finds it by target.
	seal(3, 1)
	stdout, stderr, code = runCLI(t, suite.CLIPath(), "workflow", "start",
		"--address", e.hostPort, "--namespace", e.ns,
		"--type", "MergeWal", "--task-queue", "walkeeper", "--workflow-id", "merge-wal/generic/manual",
		"--input", `{"target":"generic:manual"}`)
	if code != 0 {
		t.Fatalf("temporal workflow start: exit %d\n%s\n%s", code, stdout, stderr)
	}
	res = e.mergeResult(e.c.GetWorkflow(e.ctx(waitShort), "merge-wal/generic/manual", ""), waitLong)
	if res.Reclaimed != 1 || pending() != 0 {
		t.Fatalf("merge started by the Temporal CLI: %+v, pending %d", res, pending())
	}
	waitFor(t, waitShort, "visibility to find the CLI-started run by WalTarget", func() (bool, error) {
		_, n, err := e.listExecutions(`WorkflowId = 'merge-wal/generic/manual' AND WalTarget = 'generic:manual' AND WalKind = 'generic'`)
		return n == 3, err // HTTP, walkeeper merge, temporal workflow start
	})
}

// runCLI runs the walkeeper binary and returns its output and exit status.
func runCLI(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run %s %v: %v", bin, args, err)
		return "", "", -1
	}
}
