package testtemporal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
)

// SuiteOptions configure a Suite.
type SuiteOptions struct {
	// Name prefixes the scratch directory, the namespaces (walkeeper-<Name>-NN) and the
	// suite's messages. Required.
	Name string
	// Namespaces is the pool size: each test takes one, so a workflow one test starts never
	// reaches another test's workers.
	Namespaces int
	// BinaryEnv names an environment variable that may point at an existing walkeeper
	// binary to run instead of building ./cmd/walkeeper ("" = always build).
	BinaryEnv string
}

// Suite is the TestMain of a package whose tests run walkeeper against one shared Temporal
// server: a scratch directory kept when anything fails, the server with a pool of
// namespaces, and the walkeeper binary built once while the server starts.
type Suite struct {
	opts SuiteOptions

	hostPort string
	cliPath  string
	logDir   string
	binDir   string
	nsNext   atomic.Int32
	failed   atomic.Bool
	binary   func() (string, error) // WalkeeperBinary, once
}

// NewSuite returns a suite; its Main runs the tests.
func NewSuite(o SuiteOptions) *Suite {
	s := &Suite{opts: o}
	s.binary = sync.OnceValues(func() (string, error) {
		if p := os.Getenv(o.BinaryEnv); p != "" { // os.Getenv("") is ""
			if !cachebin.IsExecutable(p) {
				return "", fmt.Errorf("%s=%s: not an executable file", o.BinaryEnv, p)
			}
			return p, nil
		}
		return walkeeperproc.Build(filepath.Join(s.binDir, "walkeeper"))
	})
	return s
}

// Main starts the server, runs m and stops everything; the result is the exit code.
func (s *Suite) Main(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "walkeeper-"+s.opts.Name+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.opts.Name, err)
		return 1
	}
	s.logDir, s.binDir = filepath.Join(dir, "logs"), filepath.Join(dir, "bin")
	_ = os.MkdirAll(s.logDir, 0o755)
	_ = os.MkdirAll(s.binDir, 0o755)

	// A build still running when the tests end (none needed it) is awaited, so that it
	// cannot write into the directory after it is removed.
	var built sync.WaitGroup
	built.Go(func() { _, _ = s.WalkeeperBinary() })
	defer built.Wait()

	srv, err := s.startServer(filepath.Join(dir, "temporal"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (files in %s)\n", s.opts.Name, err, dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s: Temporal %s server at %s\n", s.opts.Name, srv.mode, srv.cfg.HostPort)
	s.hostPort = srv.cfg.HostPort

	code := m.Run()

	if err := srv.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stop Temporal server: %v\n", s.opts.Name, err)
	}
	built.Wait()
	if code != 0 || s.failed.Load() {
		fmt.Fprintf(os.Stderr, "%s: logs kept in %s\n", s.opts.Name, dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}

// startServer starts the selected server with the suite's namespaces, and finds the CLI
// that drives any of them.
func (s *Suite) startServer(dir string) (*server, error) {
	namespaces := make([]string, s.opts.Namespaces)
	for i := range namespaces {
		namespaces[i] = s.namespace(i)
	}
	mode, err := SelectedMode()
	if err != nil {
		return nil, err
	}
	if cfg := ExternalConfig(); mode == ModeExternal && cfg.Namespace != "" {
		return nil, fmt.Errorf("%s is not supported by suites that create a namespace per test; unset it", EnvNamespace)
	} else if mode == ModeExternal && (cfg.TLS || cfg.TLSCert != "" || cfg.TLSCA != "" || cfg.APIKey != "") {
		return nil, fmt.Errorf("%s with TLS or an API key: the suites started from TestMain dial without TLS; run them against a plain-text frontend", EnvHostPort)
	}
	// The first run may build the Temporal CLI (minutes); the start itself takes seconds,
	// but a loaded machine can stretch it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if s.cliPath, err = devserver.EnsureCLI(ctx, "", os.Stderr); err != nil {
		return nil, err
	}
	return startServer(ctx, mode, Options{ExtraNamespaces: namespaces}, dir, os.Stderr)
}

// Namespace skips t under -short and otherwise hands it the next namespace of the pool.
func (s *Suite) Namespace(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	i := int(s.nsNext.Add(1) - 1)
	if i >= s.opts.Namespaces {
		t.Fatalf("namespace pool exhausted (%d): raise the suite's Namespaces", s.opts.Namespaces)
	}
	return s.namespace(i)
}

func (s *Suite) namespace(i int) string {
	return fmt.Sprintf("walkeeper-%s-%02d", s.opts.Name, i)
}

// KeepLogsIfFailed keeps the scratch directory when t fails, and says where its log is.
func (s *Suite) KeepLogsIfFailed(t testing.TB, logPath string) {
	t.Cleanup(func() {
		if t.Failed() {
			s.failed.Store(true)
			t.Logf("log: %s", logPath)
		}
	})
}

// HostPort is the shared server's frontend address.
func (s *Suite) HostPort() string { return s.hostPort }

// CLIPath is the Temporal CLI that runs the server.
func (s *Suite) CLIPath() string { return s.cliPath }

// LogPath is where a test's process named name logs.
func (s *Suite) LogPath(name string) string { return filepath.Join(s.logDir, name+".log") }

// WalkeeperBinary returns $BinaryEnv when set, else ./cmd/walkeeper built once.
func (s *Suite) WalkeeperBinary() (string, error) { return s.binary() }
