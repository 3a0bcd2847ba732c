// Package integration runs walkeeper end to end against a real Temporal server started by
// TestMain (never assumed running) through internal/testtemporal: `temporal server
// start-dev` by default, the production server on PostgreSQL with
// WALKEEPER_TEST_TEMPORAL_SERVER=cluster,
// in-process workers built with worker.New on file:// storage, and, where a test needs a
// real OS process, the walkeeper binary built by TestMain or this test binary re-executed
// as a worker.
//
// Every test gets its own Temporal namespace (created when the server starts), so tests run
// in parallel without one test's workers picking up another's tasks.
//
// `go test -short` skips the package.
package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/testtemporal"
)

// namespacePool is the set of namespaces the dev server creates; each test takes one.
const namespacePool = 20

var suite struct {
	skip     string // non-empty: every test skips with this reason
	hostPort string
	cliPath  string // the Temporal CLI running the server
	logDir   string
	nsNext   atomic.Int32

	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
	failed    atomic.Bool
}

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if testing.Short() {
		suite.skip = "integration tests start a Temporal dev server; skipped with -short"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "walkeeper-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	suite.logDir = filepath.Join(dir, "logs")
	suite.binDir = filepath.Join(dir, "bin")
	_ = os.MkdirAll(suite.logDir, 0o755)
	_ = os.MkdirAll(suite.binDir, 0o755)

	// Build the walkeeper binary while the server starts; the tests that exec it wait for it.
	// A build still running when the tests end (none needed it) is awaited, so that it
	// cannot write into the directory after it is removed.
	built := make(chan struct{})
	go func() {
		defer close(built)
		_, _ = walkeeperBinary()
	}()
	defer func() { <-built }()

	var namespaces []string
	for i := range namespacePool {
		namespaces = append(namespaces, namespaceName(i))
	}
	// The first run may build the Temporal CLI (minutes); the start itself takes seconds,
	// but a loaded machine can stretch it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	// testtemporal picks the server: the dev server by default, the PostgreSQL-backed cluster
	// with WALKEEPER_TEST_TEMPORAL_SERVER=cluster, an existing one with WALKEEPER_TEST_TEMPORAL.
	srv, err := testtemporal.StartShared(ctx, testtemporal.SharedOptions{
		Dir:        dir,
		Namespaces: namespaces,
		Progress:   os.Stderr,
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v (files in %s)\n", err, dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "integration: Temporal %s server at %s\n", srv.Mode(), srv.HostPort())
	suite.hostPort = srv.HostPort()
	suite.cliPath = srv.CLIPath()

	code := m.Run()

	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: stop Temporal server:", err)
	}
	<-built
	if code != 0 || suite.failed.Load() {
		fmt.Fprintf(os.Stderr, "integration: logs kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}

func namespaceName(i int) string { return fmt.Sprintf("walkeeper-it-%02d", i) }

// walkeeperBinary builds ./cmd/walkeeper once and returns its path.
func walkeeperBinary() (string, error) {
	suite.buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			suite.buildErr = err
			return
		}
		out := filepath.Join(suite.binDir, "walkeeper")
		if runtime.GOOS == "windows" {
			out += ".exe"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/walkeeper")
		cmd.Dir = root
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			suite.buildErr = fmt.Errorf("go build ./cmd/walkeeper: %v\n%s", err, buf.String())
			return
		}
		suite.binPath = out
	})
	return suite.binPath, suite.buildErr
}

// moduleRoot is the directory holding go.mod (the tests run in <root>/test/integration).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
