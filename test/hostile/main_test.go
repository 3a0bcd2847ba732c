package hostile

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/testtemporal"
)

// binEnv names a walkeeper binary to attack instead of building ./cmd/walkeeper, so the
// suite can be run against an older build to show each test failing before its fix.
const binEnv = "WALKEEPER_HOSTILE_BIN"

// namespacePool is the number of Temporal namespaces the server creates; each test takes
// one, so a workflow one test starts never reaches another test's worker.
const namespacePool = 16

var suite struct {
	skip     string // non-empty: every test skips with this reason
	hostPort string
	cliPath  string
	logDir   string
	nsNext   atomic.Int32
	failed   atomic.Bool

	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if testing.Short() {
		suite.skip = "the hostile suite runs worker processes against a Temporal server; skipped with -short"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "walkeeper-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	suite.logDir = filepath.Join(dir, "logs")
	suite.binDir = filepath.Join(dir, "bin")
	_ = os.MkdirAll(suite.logDir, 0o755)
	_ = os.MkdirAll(suite.binDir, 0o755)

	// Build the worker while the server starts.
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	srv, err := testtemporal.StartShared(ctx, testtemporal.SharedOptions{
		Dir:        dir,
		Namespaces: namespaces,
		Progress:   os.Stderr,
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hostile: %v (files in %s)\n", err, dir)
		return 1
	}
	suite.hostPort = srv.HostPort()
	suite.cliPath = srv.CLIPath()

	code := m.Run()

	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile: stop Temporal server:", err)
	}
	<-built
	if code != 0 || suite.failed.Load() {
		fmt.Fprintf(os.Stderr, "hostile: worker logs kept in %s\n", suite.logDir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}

func namespaceName(i int) string { return fmt.Sprintf("walkeeper-hostile-%02d", i) }

// walkeeperBinary is $WALKEEPER_HOSTILE_BIN, or ./cmd/walkeeper built once.
func walkeeperBinary() (string, error) {
	suite.buildOnce.Do(func() {
		if p := os.Getenv(binEnv); p != "" {
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
				suite.buildErr = fmt.Errorf("%s=%s: not an executable file", binEnv, p)
				return
			}
			suite.binPath = p
			return
		}
		root, err := cachebin.ModuleRoot()
		if err != nil {
			suite.buildErr = err
			return
		}
		out := filepath.Join(suite.binDir, "walkeeper")
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
