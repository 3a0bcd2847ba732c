package testtemporal

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path/filepath"
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

// StartRestartable starts the server EnvServer selects, for t, and a client of o.Namespace
// ("default" when empty). With EnvHostPort set (someone else's server) the test is skipped:
// restarting that server is not the test's to do.
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
	o.Namespace = cmp.Or(o.Namespace, defaultNamespace)
	// The first start leaves the port to devserver.Start, which picks a free one and picks
	// again when another process binds it first; restarts then keep the port it chose.
	d := &devServer{opts: devOptions(o, filepath.Join(t.TempDir(), "temporal"))}
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
	if _, port, err := net.SplitHostPort(d.srv.HostPort()); err != nil {
		t.Fatalf("testtemporal: dev server address %q: %v", d.srv.HostPort(), err)
	} else if d.opts.Port, err = strconv.Atoi(port); err != nil {
		t.Fatalf("testtemporal: dev server address %q: %v", d.srv.HostPort(), err)
	}
	return Restartable{HostPort: d.srv.HostPort(), RestartServer: d.restart},
		dial(t, temporaladmin.Config{HostPort: d.srv.HostPort(), Namespace: o.Namespace})
}

// devServer is the dev server on an on-disk database and a fixed port, so a restart comes
// back on the same address with the same workflows.
type devServer struct {
	opts devserver.Options
	srv  *devserver.Server
}

func (d *devServer) start(ctx context.Context) error {
	srv, err := devserver.Start(ctx, d.opts)
	if err != nil {
		return fmt.Errorf("start dev server: %w", err)
	}
	d.srv = srv
	return nil
}

func (d *devServer) restart(ctx context.Context) error {
	if err := d.srv.Stop(); err != nil {
		return fmt.Errorf("stop dev server: %w", err)
	}
	d.srv = nil
	return d.start(ctx)
}
