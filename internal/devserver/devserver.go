// Package devserver runs a local Temporal dev server (`temporal server start-dev`) as a child
// process: it finds the Temporal CLI or builds it once, picks free ports, waits until the
// namespace answers, and stops the whole process group. `walkeeper dev`, the benchmarks and the
// tests use it; a production worker never does, which is why it lives in internal/ and not in
// worker/.
package devserver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/proc"
)

// The Temporal CLI release that walkeeper builds when none is installed. It is the newest
// tag that `go install` accepts (later tags carry a replace directive) and it embeds the Web UI.
const (
	CLIVersion = "v1.5.1"
	CLIModule  = "github.com/temporalio/cli/cmd/temporal"
	// CLIEnv names an explicit Temporal CLI binary.
	CLIEnv = "WALKEEPER_TEMPORAL_CLI"
)

// defaultNamespace always exists on a dev server.
const defaultNamespace = "default"

// DiscardLogger silences an SDK client: the readiness probes' and the tests'.
var DiscardLogger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

// Options configures a local `temporal server start-dev`.
type Options struct {
	// CLIPath is an explicit Temporal CLI binary; empty = FindCLI's search.
	CLIPath string
	// Install builds the CLI into DefaultInstallDir with `go install` when none is found.
	Install bool
	// DataDir holds temporal.db (and temporal.log when Output is nil); empty = in-memory
	// database and no log file.
	DataDir string
	// ScratchDB keeps temporal.db in SQLite's write-ahead-log mode without fsync, for test
	// servers on a busy disk (docs/RELIABILITY.md). Ignored without DataDir.
	ScratchDB bool
	// Port of the gRPC frontend on 127.0.0.1; 0 = a free port.
	Port int
	// UIPort of the Web UI; 0 = a free port. Ignored when Headless.
	UIPort int
	// Headless disables the Web UI.
	Headless bool
	// Namespace to wait for (created if not "default", which always exists); empty = "default".
	Namespace string
	// ExtraNamespaces are created as well.
	ExtraNamespaces []string
	// NoSearchAttributes skips pre-registering walkeeper's search attributes (to test
	// EnsureSearchAttributes against a vanilla server).
	NoSearchAttributes bool
	// LogLevel of the server (debug|info|warn|error); empty = warn.
	LogLevel string
	// Output receives the server's stdout and stderr; nil = DataDir/temporal.log, or
	// discarded when DataDir is empty. The last 16 KiB are kept for error messages anyway.
	Output io.Writer
	// Progress receives human-readable progress (CLI build, start); nil = discarded.
	Progress io.Writer
	// StartTimeout bounds the wait for the frontend; 0 = 90s.
	StartTimeout time.Duration
	// DynamicConfig adds "key=value" server settings after TunedDynamicConfig (a later
	// value of the same key wins).
	DynamicConfig []string
	// ServerDefaults leaves out TunedDynamicConfig: the server's own defaults, for
	// side-by-side measurements.
	ServerDefaults bool
	// MetricsPort serves the server's Prometheus metrics on 127.0.0.1:<port> (0 = off).
	MetricsPort int
}

// TunedDynamicConfig is the server tuning walkeeper's dev and test servers start with, as
// deploy/temporal/dynamicconfig.yaml does for docker compose; docs/OPERATIONS.md §11 and §11b
// say why each value.
var TunedDynamicConfig = []string{
	"history.transferProcessorMaxPollRPS=1000",
	"matching.useNewMatcher=true",
	"matching.enableFairness=true",
	"matching.numTaskqueueReadPartitions=1",
	"matching.numTaskqueueWritePartitions=1",
}

// Server is a running `temporal server start-dev` child process (in its own process group).
type Server struct {
	port  int
	uiURL string
	p     *proc.Proc
}

// HostPort is the frontend address, e.g. "127.0.0.1:7233".
func (s *Server) HostPort() string { return proc.Addr(s.port) }

// Port is the frontend's port, the one a restart on the same address asks for.
func (s *Server) Port() int { return s.port }

// UIURL is the Web UI address, "" when headless.
func (s *Server) UIURL() string { return s.uiURL }

// PID is the server's process id (also its process group id).
func (s *Server) PID() int { return s.p.PID() }

// Start finds (or installs) the Temporal CLI, starts a dev server and waits until
// its frontend answers and its namespace is usable. ctx bounds the start only; the server runs
// until Stop. Ports of 0 are picked free; a port race is retried with new ports.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts.Namespace = cmp.Or(opts.Namespace, defaultNamespace)
	opts.LogLevel = cmp.Or(opts.LogLevel, "warn")
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 90 * time.Second
	}
	cli, err := FindCLI(opts.CLIPath)
	if errors.Is(err, errCLINotFound) && opts.Install {
		cli, err = installCLI(ctx, opts.Progress)
	}
	if err != nil {
		return nil, err
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("dev server data dir: %w", err)
		}
	}
	pickPorts := opts.Port == 0 || (!opts.Headless && opts.UIPort == 0)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// Both at once, so that the two are distinct.
		free, err := proc.FreePorts(2)
		if err != nil {
			return nil, err
		}
		o := opts
		o.Port = cmp.Or(o.Port, free[0])
		if !o.Headless {
			o.UIPort = cmp.Or(o.UIPort, free[1])
		}
		s, err := startOnce(ctx, cli, o)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !pickPorts || ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, cli string, o Options) (*Server, error) {
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(o.Port),
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--log-level", o.LogLevel,
		"--log-format", "json",
	}
	for _, kv := range dynamicConfig(o) {
		args = append(args, "--dynamic-config-value", kv)
	}
	if o.MetricsPort > 0 {
		args = append(args, "--metrics-port", strconv.Itoa(o.MetricsPort))
	}
	for _, ns := range append([]string{o.Namespace}, o.ExtraNamespaces...) {
		if ns != defaultNamespace {
			args = append(args, "--namespace", ns)
		}
	}
	if o.Headless {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(o.UIPort))
	}
	if o.DataDir != "" {
		args = append(args, "--db-filename", filepath.Join(o.DataDir, "temporal.db"))
		if o.ScratchDB {
			args = append(args, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off")
		}
	}
	if !o.NoSearchAttributes {
		for _, name := range slices.Sorted(maps.Keys(contract.SearchAttributes)) {
			args = append(args, "--search-attribute", name+"="+contract.SearchAttributes[name].String())
		}
	}

	s := &Server{port: o.Port}
	if !o.Headless {
		s.uiURL = "http://" + proc.Addr(o.UIPort)
	}
	spec := proc.Spec{Path: cli, Args: args, Output: o.Output, ParentDeath: true}
	if o.Output == nil && o.DataDir != "" {
		spec.Log = filepath.Join(o.DataDir, "temporal.log")
	}
	fmt.Fprintf(cmp.Or(o.Progress, io.Discard), "starting Temporal dev server on %s (%s)\n", s.HostPort(), contract.Printable(cli))
	p, err := proc.Start(spec)
	if err != nil {
		return nil, err
	}
	s.p = p
	// Ready once the frontend answers, the namespace can be described, and the frontend is
	// this process's.
	if err := p.WaitFor(ctx, o.StartTimeout, func() error { return ServesFrom(ctx, p, o.Port, o.Namespace) }); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("temporal dev server on %s: %w", s.HostPort(), err)
	}
	return s, nil
}

// dynamicConfig is TunedDynamicConfig (unless ServerDefaults) with o.DynamicConfig
// replacing the defaults of the keys it names, each key once.
func dynamicConfig(o Options) []string {
	key := func(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }
	var out []string
	if !o.ServerDefaults {
		for _, d := range TunedDynamicConfig {
			if !slices.ContainsFunc(o.DynamicConfig, func(kv string) bool { return key(kv) == key(d) }) {
				out = append(out, d)
			}
		}
	}
	return append(out, o.DynamicConfig...)
}

// ServesFrom is nil once the Temporal frontend on port answers and describes every one of
// namespaces, and process p holds that port: the readiness probe of this package's server
// and of the tests' cluster.
func ServesFrom(ctx context.Context, p *proc.Proc, port int, namespaces ...string) error {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: proc.Addr(port), Logger: DiscardLogger})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, ns := range namespaces {
		if _, err := c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err != nil {
			return err
		}
	}
	if !p.Listens(port) {
		return fmt.Errorf("port %d is served by another process than pid %d", port, p.PID())
	}
	return nil
}

// Stop terminates the server's process group: SIGTERM, then SIGKILL 10s later. It fails
// only when the server outlives SIGKILL. Safe to call more than once and from several
// goroutines.
func (s *Server) Stop() error {
	err := s.p.Stop(syscall.SIGTERM, 10*time.Second)
	select {
	case <-s.p.Exited(): // if only after SIGKILL: stopped
		return nil
	default:
		return err
	}
}

var errCLINotFound = errors.New("temporal CLI not found")

// FindCLI locates a Temporal CLI binary: explicit (a flag), then $WALKEEPER_TEMPORAL_CLI,
// then `temporal` on PATH, then $GOBIN, $(go env GOPATH)/bin and ~/go/bin, then
// <module root>/.cache/bin. The error wraps a "not found" sentinel that EnsureCLI cures.
func FindCLI(explicit string) (string, error) {
	if p := cmp.Or(explicit, os.Getenv(CLIEnv)); p != "" {
		if cachebin.IsExecutable(p) {
			return filepath.Abs(p)
		}
		return "", fmt.Errorf("temporal CLI %q is not an executable file", p)
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return filepath.Abs(p)
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, d := range filepath.SplitList(cachebin.GoEnv("GOPATH")) { // none when unset
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	dirs = append(dirs, DefaultInstallDir())
	for _, d := range dirs {
		if p := filepath.Join(d, "temporal"); cachebin.IsExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked at $%s, PATH, %s); run ./scripts/install-temporal.sh or let walkeeper build it",
		errCLINotFound, CLIEnv, strings.Join(dirs, ", "))
}

// DefaultInstallDir is <module root>/.cache/bin, or ./.cache/bin outside the module.
func DefaultInstallDir() string {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		root, _ = os.Getwd()
	}
	return filepath.Join(root, ".cache", "bin")
}

// installCLI builds the Temporal CLI (CLIVersion) into DefaultInstallDir with `go install`,
// CGO off. It takes a file lock so that parallel test packages build it once, and returns at
// once when the binary is already there.
func installCLI(ctx context.Context, progress io.Writer) (string, error) {
	dir, err := filepath.Abs(DefaultInstallDir())
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("temporal CLI install dir: %w", err)
	}
	bin := filepath.Join(dir, "temporal")
	unlock, err := proc.LockFile(ctx, filepath.Join(dir, ".temporal-install.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if cachebin.IsExecutable(bin) {
		return bin, nil
	}
	pw := cmp.Or(progress, io.Discard)
	fmt.Fprintf(pw, "building Temporal CLI %s (first run only, ~2-3 min) into %s ...\n", CLIVersion, dir)
	cmd := exec.CommandContext(ctx, "go", "install", CLIModule+"@"+CLIVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("go install %s: %w", CLIModule, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return "", fmt.Errorf("go install %s@%s: %w\n%s", CLIModule, CLIVersion, err, out.String())
			}
			if !cachebin.IsExecutable(bin) {
				return "", fmt.Errorf("go install succeeded but %s is missing", bin)
			}
			fmt.Fprintf(pw, "built Temporal CLI in %s: %s\n", time.Since(start).Round(time.Second), bin)
			return bin, nil
		case <-tick.C:
			fmt.Fprintf(pw, "  still building Temporal CLI (%s)...\n", time.Since(start).Round(time.Second))
		}
	}
}

// EnsureCLI finds the CLI (FindCLI) or installs it into DefaultInstallDir.
func EnsureCLI(ctx context.Context, explicit string, progress io.Writer) (string, error) {
	p, err := FindCLI(explicit)
	if errors.Is(err, errCLINotFound) {
		return installCLI(ctx, progress)
	}
	return p, err
}
