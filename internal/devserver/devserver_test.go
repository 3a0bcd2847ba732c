package devserver_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/internal/devserver"
)

// TestDevServer starts a dev server with its Web UI the way `walkeeper dev` does, checks
// that the frontend and the UI answer, and that Stop ends the whole process group.
func TestDevServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	srv, err := devserver.Start(ctx, devserver.Options{
		Install:  true,
		DataDir:  dir,
		Progress: t.Output(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	assert.FileExists(t, filepath.Join(dir, "temporal.db"))
	assert.FileExists(t, filepath.Join(dir, "temporal.log"))
	require.NotEmpty(t, srv.UIURL())

	c, err := client.DialContext(ctx, client.Options{HostPort: srv.HostPort(), Logger: devserver.DiscardLogger})
	require.NoError(t, err)
	c.Close()

	// The embedded UI serves its index page.
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.UIURL())
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 250*time.Millisecond)

	// A second server told to use the first one's port fails to start: its readiness probe
	// does not take the first one's frontend for its own.
	_, portText, err := net.SplitHostPort(srv.HostPort())
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	second, err := devserver.Start(ctx, devserver.Options{Install: true, Headless: true, Port: port, Progress: t.Output()})
	if err == nil {
		_ = second.Stop()
	}
	require.ErrorContains(t, err, "address already in use")

	pid := srv.PID()
	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop(), "Stop is idempotent")
	select {
	case <-srv.Done():
	default:
		t.Fatal("server process still running after Stop")
	}
	// No process of the group is left.
	assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH)
}

func TestFindTemporalCLIExplicit(t *testing.T) {
	_, err := devserver.FindCLI(filepath.Join(t.TempDir(), "nope"))
	assert.Error(t, err)
	t.Setenv(devserver.CLIEnv, filepath.Join(t.TempDir(), "nope"))
	_, err = devserver.FindCLI("")
	assert.Error(t, err, "a wrong $%s is an error, not a silent fallback", devserver.CLIEnv)
}

// TestScratchDBIsWriteAheadLogged: a test server's database runs in SQLite's write-ahead-log
// mode (the -wal file beside it once the server has written), and its data outlives a
// restart of the server on the same file.
func TestScratchDBIsWriteAheadLogged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	opts := devserver.Options{Install: true, DataDir: dir, ScratchDB: true, Headless: true, Namespace: "scratch", Progress: t.Output()}
	srv, err := devserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	assert.FileExists(t, filepath.Join(dir, "temporal.db-wal"))
	require.NoError(t, srv.Stop())

	// The namespace the first server created is still there: nothing was lost with fsync off.
	opts.Namespace = ""
	srv, err = devserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.HostPort(), Logger: devserver.DiscardLogger})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "scratch"})
	require.NoError(t, err)
}
