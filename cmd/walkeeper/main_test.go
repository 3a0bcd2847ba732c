package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// suite is the Temporal server the package's tests share, started once by TestMain where each
// test started its own; each test takes a namespace of its own (newTemporalNS), so that none
// sees another's schedules or runs.
var suite = testtemporal.NewSuite(testtemporal.SuiteOptions{Name: "cmd", Namespaces: 16, BinaryEnv: walkeeperproc.EnvBinary})

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(suite.Main(m))
}

// temporalNS is a test's namespace of the shared server and a client of it.
type temporalNS struct {
	hostPort, ns string
	c            client.Client
}

// newTemporalNS hands t a namespace of the shared server; it skips t under -short.
func newTemporalNS(t *testing.T) temporalNS {
	t.Helper()
	n := temporalNS{hostPort: suite.HostPort(), ns: suite.Namespace(t)}
	opts, err := temporaladmin.Config{HostPort: n.hostPort, Namespace: n.ns}.ClientOptions(nil)
	require.NoError(t, err)
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	n.c, err = client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(n.c.Close)
	return n
}

// run runs walkeeper with args against the namespace.
func (n temporalNS) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLI(t, append(slices.Clip(args), "--temporal", n.hostPort, "--namespace", n.ns)...)
}

// ok is run that requires exit 0, and returns stdout.
func (n temporalNS) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := n.run(t, args...)
	require.Equal(t, cli.ExitOK, code, "walkeeper %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errOut)
	return out
}

// refused runs walkeeper with args against the namespace and asserts it exits code with
// nothing on stdout and want, the whole of stderr.
func (n temporalNS) refused(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, out, errOut := n.run(t, args...)
	assert.Equal(t, code, got, "walkeeper %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errOut)
	assert.Empty(t, out, "walkeeper %s", strings.Join(args, " "))
	assert.Equal(t, want, errOut, "walkeeper %s", strings.Join(args, " "))
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"--bogus"},
		{"merge"},
		{"merge", "generic:a", "generic:b"},
		{"merge", "not-a-target"},
		{"merge", "nokind:x"},
		{"merge", "generic:a", "--max-generations", "many"},
		{"merge", "generic:a", "--merge-run-timeout", "1s"},
		{"compact", "generic:a", "--merge-run-timeout", "0s"},
		{"compact"},
		{"merge", "generic:a", "--timeout", "-1s"},
		{"compact", "generic:a", "--wait", "--timeout", "-1ns"},
		{"status", "generic:a", "generic:b"},
		{"status", "generic:a/b"},
		{"status", "--merge-run-timeout", "1ns"},
		{"history", "generic:a", "--limit", "0"},
		{"history", "generic:a", "--limit", "10001"},
		{"status", "--limit", "0"},
		{"status", "--limit", "1001"},
		{"status", "--after", "nokind:x"},
		{"status", "generic:a", "--after", "generic:b"},
		{"status", "generic:a", "--limit", "5"},
		{"schedule"},
		{"schedule", "bogus"},
		{"schedule", "pause", "extra"},
		{"schedule", "ensure", "--every", "0s"},
		{"schedule", "ensure", "--jitter", "-1s"},
		{"schedule", "ensure", "--target", "generic"},
		{"schedule", "describe", "--every", "1m"},
		{"schedule", "pause", "--note", strings.Repeat("n", 1025)},
		{"schedule", "pause", "--note", "bad \xff byte"},
		{"schedule", "resume", "--note", "two\nlines"},
		{"dev", "--workers", "0"},
		{"dev", "--workers", "100000"},
		{"dev", "--temporal-port", "99999"},
		{"dev", "--ui-port", "-1"},
		{"dev", "--workers", "3", "--http-port", "65534"},
		{"dev", "--sweep-every", "500ms"}, // refused before anything starts, like schedule ensure --every
		{"dev", "--sweep-every", "48h"},
		{"dev", "extra"},
		{"worker", "--merge-slots", "0"},
		{"worker", "--listen", "nonsense"},
		{"worker", "--listen", ":99999"},
		{"worker", "--temporal", "127.0.0.1:70000"},
		{"status", "--temporal", "127.0.0.1:0"},
		{"merge", "generic:a", "--temporal", "localhost"},
		{"worker", "--flush-interval", "soon"},
		{"worker", "--merge-run-timeout", "200h"},
		{"worker", "--stuck-scan-interval", "2h"},
		{"worker", "--temporal-wait", "0s", "--storage", "mem://x", "--listen", "127.0.0.1:0", "--temporal-tls-ca", "/nonexistent/ca.pem"},
		{"worker", "--temporal-wait", "0s", "--storage", "s3://b?region=us-east-1&bogus=1", "--listen", "127.0.0.1:0"},
		{"worker", "--temporal-wait", "0s", "--storage", "s3://b?region=us-east-1&endpoint=ftp://x", "--listen", "127.0.0.1:0"},
		{"load", "--target", "x"},
		{"load", "--rate", "0"},
		{"queries", "--behind", "-1"},
		{"load", "--rate", "2000000000", "--batch", "1"},
		{"load", "--duration", "-1s"},
		{"load", "--flush-every", "-1s"},
		{"load", "--keys", "-5"},
		{"load", "--batch", "10001", "--rate", "10001", "--duration", "1s"},
		{"load", "--http", ",", "--duration", "1s"},
		{"load", "--http", "127.0.0.1:8081", "--duration", "1s"},
		{"load", "--http", "ftp://127.0.0.1:8081", "--duration", "1s"},
		{"--log-level", "loud", "status"},
		{"status", "--temporal-tls-ca", "/nonexistent/ca.pem"},
		{"merge", "generic:a", "--temporal-tls-cert", "/nonexistent/c.pem", "--temporal-tls-key", "/nonexistent/k.pem"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, args...)
			assert.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.NotEmpty(t, errOut)
		})
	}
}

// TestHelpEverywhere runs --help on every command of the tree.
func TestHelpEverywhere(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRootCmd(), nil)
	require.GreaterOrEqual(t, len(paths), 12, "root, dev, worker, merge, compact, status, load, schedule + 5")
	for _, p := range paths {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string{}, p...), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errOut := runCLI(t, args...)
				assert.Equal(t, cli.ExitOK, code, errOut)
				assert.Contains(t, out, "Usage:")
			})
		}
	}
	code, out, _ := runCLI(t, "help", "merge")
	assert.Equal(t, cli.ExitOK, code)
	assert.Contains(t, out, "walkeeper merge TARGET")
	code, out, _ = runCLI(t)
	assert.Equal(t, cli.ExitOK, code)
	assert.Contains(t, out, "Available Commands:")
}

// A knob a workflow, Temporal or the sweep's windows would refuse is a usage error naming the
// flag, said before anything is dialed: with Temporal down it read "cannot reach Temporal"
// (exit 1), and a per-target interval under a second was Temporal's own refusal (exit 1).
func TestKnobsAreRefusedBeforeDialing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", "generic:a", "--max-generations", "-5"}, "--max-generations -5"},
		{[]string{"merge", "generic:a", "--max-generations", "100001"}, "--max-generations 100001"},
		{[]string{"merge", "generic:a", "--max-bytes", "5"}, "--max-bytes 5"},
		{[]string{"merge", "generic:a", "--max-bytes", "-1"}, "--max-bytes -1"},
		{[]string{"schedule", "ensure", "--target", "generic:a", "--every", "500ms"}, "--every 500ms"},
		{[]string{"schedule", "ensure", "--every", "500ms"}, "--every 500ms"},
		{[]string{"schedule", "ensure", "--every", "1m", "--window", "500ms"}, "--window 500ms"},
		{[]string{"schedule", "ensure", "--every", "1m", "--window", "48h"}, "--window 48h0m0s"},
		{[]string{"schedule", "ensure", "--window", "0"}, "--window must be positive"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(tc.args, "--temporal", "127.0.0.1:1")...)
			assert.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.Contains(t, errOut, tc.want)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		})
	}
}

// TestCommandsAgainstTemporal drives the Temporal-facing commands against a real dev server.
func TestCommandsAgainstTemporal(t *testing.T) {
	tn := newTemporalNS(t)
	out := tn.ok(t, "schedule", "ensure", "--every", "1m")
	assert.Contains(t, out, "walkeeper-sweep ensured: a sweep window every 1h0m0s, a round every 1m0s")
	tn.ok(t, "schedule", "ensure", "--every", "20s", "--window", "30m")
	out = tn.ok(t, "schedule", "describe")
	assert.Contains(t, out, "every 30m0s")
	assert.Contains(t, out, "SweepWindow")
	assert.Contains(t, out, "a round every 20s, windows of 30m0s")
	assert.Contains(t, out, "BufferOne")
	tn.ok(t, "schedule", "pause", "--note", "testing")
	out = tn.ok(t, "schedule", "describe")
	assert.Contains(t, out, "paused")
	assert.Contains(t, out, "testing")
	tn.ok(t, "schedule", "resume")
	// The ensure (or the resume) started a window; no worker runs here, so it stays
	// running and the trigger signals it.
	assert.Contains(t, tn.ok(t, "schedule", "trigger"), "signaled sweep window sweep-window-")

	tn.ok(t, "schedule", "ensure", "--target", "rollout:gs", "--every", "1h", "--storage", rolloutStorage(t, "gs"))
	out = tn.ok(t, "schedule", "describe", "--target", "rollout:gs")
	assert.Contains(t, out, "merge-wal-tick/rollout/gs")
	assert.Contains(t, out, "MergeWalTick")

	// No worker runs in this test: the merge starts and stays running, and a second merge
	// attaches to it (same workflow ID).
	out = tn.ok(t, "merge", "generic:gs")
	assert.Contains(t, out, "merge-wal/generic/gs")
	first := runID(out)
	require.NotEmpty(t, first, "no run id in the merge's answer:\n%s", out)
	out = tn.ok(t, "merge", "generic:gs")
	assert.Equal(t, first, runID(out), "second merge must attach to the running one")

	out = tn.ok(t, "status")
	assert.Contains(t, out, "merge-wal/generic/gs")
	assert.Contains(t, out, "generic:gs")
	out = tn.ok(t, "status", "generic:gs")
	assert.Contains(t, out, "Running")
	assert.Contains(t, out, "no worker is polling task queue walkeeper")
	assert.Contains(t, out, "compact/generic/gs: no run on record")
}

func runID(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "run" && f[1] == "id:" {
			return f[2]
		}
	}
	return ""
}

// A global flag's environment value that does not parse is a usage error (exit 2, one line
// naming the variable), not a silent default: WALKEEPER_TEMPORAL_TLS=maybe used to mean false.
func TestBadTemporalEnvExitsTwo(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "maybe")
	for _, args := range [][]string{
		{"merge", "generic:a"},
		{"status"},
		{"worker", "--instance", "a", "--storage", "mem://"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, args...)
			assert.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			first, _, _ := strings.Cut(errOut, "\n")
			assert.Contains(t, first, `WALKEEPER_TEMPORAL_TLS="maybe"`)
		})
	}
}
