package testtemporal

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

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

// StartRestartable starts the server EnvServer selects, for t, and a client of its "default"
// namespace. With EnvHostPort set (someone else's server) the test is skipped: restarting
// that server is not the test's to do.
func StartRestartable(t testing.TB, o Options) (Restartable, client.Client) {
	t.Helper()
	mode, err := SelectedMode()
	if err != nil {
		t.Fatalf("testtemporal: %v", err)
	}
	switch mode {
	case ModeExternal:
		t.Skipf("testtemporal: %s names an existing server; this test restarts its server", EnvHostPort)
	case ModeCluster:
		cl, c := StartCluster(t, o)
		return Restartable{
			HostPort:           cl.HostPort(),
			RestartServer:      func(ctx context.Context) error { return cl.RestartServer(ctx, false) },
			RestartPersistence: func(ctx context.Context) error { return cl.RestartPostgres(ctx, temporalcluster.Fast) },
		}, c
	}
	d, c := startDev(t, o)
	return Restartable{HostPort: d.srv.HostPort(), RestartServer: d.restart}, c
}

// devServer is a test's dev server on an on-disk database: a restart brings it back on the
// same address with the same workflows.
type devServer struct {
	opts devserver.Options
	srv  *devserver.Server
}

// startDev runs a dev server for t, stopped by t.Cleanup, its log (temporal.log) beside its
// database, and returns it with a client of its "default" namespace.
func startDev(t testing.TB, o Options) (*devServer, client.Client) {
	t.Helper()
	d := &devServer{opts: devOptions(o, t.TempDir())}
	d.opts.Progress = progressWriter{t}
	// The CLI build (first run only) can take minutes; the start itself seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := d.start(ctx); err != nil {
		t.Fatalf("testtemporal: %v", err)
	}
	t.Cleanup(func() {
		if d.srv != nil {
			if err := d.srv.Stop(); err != nil {
				t.Errorf("testtemporal: stop dev server: %v", err)
			}
		}
	})
	return d, dial(t, temporaladmin.Config{HostPort: d.srv.HostPort(), Namespace: defaultNamespace})
}

func (d *devServer) start(ctx context.Context) error {
	srv, err := devserver.Start(ctx, d.opts)
	if err != nil {
		return fmt.Errorf("start dev server: %w", err)
	}
	d.srv = srv
	return nil
}

// restart keeps the port the first start picked (devserver.Start picks a free one, and again
// when another process binds it first), so the server comes back on the same address.
func (d *devServer) restart(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(d.srv.HostPort())
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("dev server address %q: %w", d.srv.HostPort(), err)
	}
	if err := d.srv.Stop(); err != nil {
		return fmt.Errorf("stop dev server: %w", err)
	}
	d.opts.Port, d.srv = p, nil
	return d.start(ctx)
}
