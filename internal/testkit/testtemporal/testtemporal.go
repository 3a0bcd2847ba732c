// Package testtemporal starts a real Temporal server for tests: by default the CLI's dev
// server (devserver, the CLI found or built once into <module root>/.cache/bin) headless on
// free ports with a throw-away database; EnvServer=cluster starts the PostgreSQL-backed
// server of package temporalcluster instead, and EnvHostPort names an existing one. Everything
// started is stopped when the test ends.
package testtemporal

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// defaultNamespace is the namespace every dev server has.
const defaultNamespace = "default"

// Options tune Start.
type Options struct {
	// NoSearchAttributes starts a vanilla server without walkeeper's search attributes, for
	// tests of temporaladmin.EnsureSearchAttributes.
	NoSearchAttributes bool
	// ExtraNamespaces are created too (the client is not bound to them).
	ExtraNamespaces []string
	// DynamicConfig sets server settings over walkeeper's tuning (devserver.TunedDynamicConfig,
	// deploy/temporal/dynamicconfig.yaml), e.g. {"matching.enableFairness": false}; an
	// external server ignores it.
	DynamicConfig map[string]any
}

// SkipShort skips t under -short. Every test that starts a Temporal server (Start, a cluster,
// worker processes) calls it first, so that -short runs none of them, for one reason.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal server; skipped with -short")
	}
}

// Start runs the server EnvServer and EnvHostPort select for t and returns its frontend
// address and a client of its "default" namespace. It fails the test if the server cannot
// start.
func Start(t testing.TB) (hostPort string, c client.Client) {
	t.Helper()
	return StartSelected(t, Options{})
}

// StartSelected is Start with options.
func StartSelected(t testing.TB, o Options) (hostPort string, c client.Client) {
	t.Helper()
	s, c := start(t, "", o)
	return s.cfg.HostPort, c
}

// StartWithOptions is StartSelected always on a dev server.
func StartWithOptions(t testing.TB, o Options) (hostPort string, c client.Client) {
	t.Helper()
	s, c := start(t, ModeDev, o)
	return s.cfg.HostPort, c
}

// StartCluster is StartSelected always on a PostgreSQL-backed server.
func StartCluster(t testing.TB, o Options) (*temporalcluster.Cluster, client.Client) {
	t.Helper()
	s, c := start(t, ModeCluster, o)
	return s.cluster, c
}

// Restartable is a Temporal server a reliability test may stop and start again on the same
// address and database: the dev server (on-disk SQLite) or the PostgreSQL-backed cluster,
// whichever EnvServer selects.
type Restartable struct {
	HostPort string
	// RestartServer stops the server process (SIGTERM) and starts it again on the same
	// database and ports; it returns once the frontend serves the namespaces again.
	RestartServer func(ctx context.Context) error
	// RestartPersistence restarts the database under a running server; nil on the dev
	// server, whose SQLite database lives inside the server process.
	RestartPersistence func(ctx context.Context) error
}

// StartRestartable is StartSelected for a test that restarts its server; with EnvHostPort
// set (someone else's server) the test is skipped.
func StartRestartable(t testing.TB, o Options) (Restartable, client.Client) {
	t.Helper()
	if os.Getenv(EnvHostPort) != "" {
		t.Skipf("testtemporal: %s names an existing server; this test restarts its server", EnvHostPort)
	}
	s, c := start(t, "", o)
	r := Restartable{HostPort: s.cfg.HostPort, RestartServer: s.restart}
	if s.cluster != nil {
		r.RestartPersistence = func(ctx context.Context) error { return s.cluster.RestartPostgres(ctx, temporalcluster.Fast) }
	}
	return r, c
}

// start starts a server of mode ("" = SelectedMode) for t, stopped by t.Cleanup, and dials
// its "default" namespace. Its files are kept, and their directory logged, when t fails
// (testbin.TempDir).
func start(t testing.TB, mode Mode, o Options) (*server, client.Client) {
	t.Helper()
	var err error
	if mode == "" {
		if mode, err = SelectedMode(); err != nil {
			t.Fatalf("testtemporal: %v", err)
		}
	}
	dir := testbin.TempDir(t, "temporal")
	// The CLI build (first run only) can take minutes; the start itself seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := startServer(ctx, mode, o, dir, t.Output())
	if errors.Is(err, testbin.ErrNotInstalled) {
		testbin.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("testtemporal: %v (files in %s)", err, dir)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("testtemporal: stop %s server: %v", mode, err)
		}
	})
	c, err := dialContext(ctx, s.cfg, t.Output())
	if err != nil {
		t.Fatalf("testtemporal: %v", err)
	}
	t.Cleanup(c.Close)
	return s, c
}
