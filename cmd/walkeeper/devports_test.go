package main

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
	"github.com/walkeeper/walkeeper/worker"
)

// TestDevWorkerPortTakenIsReplaced: a worker port another process holds is replaced with a
// free one (port 0, chosen when the worker listens), and a free port is kept as asked.
func TestDevWorkerPortTakenIsReplaced(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	g, tc := &globalOptions{}, worker.TemporalConfig{}
	cfg := devWorkerConfig(g, tc, "mem://", 0, &devOptions{httpPort: taken})
	_, port, err := net.SplitHostPort(cfg.Listen)
	require.NoError(t, err)
	require.Equal(t, "0", port, "worker port %d is taken: want port 0 (a free one)", taken)

	free, err := testbin.FreePort()
	require.NoError(t, err)
	cfg = devWorkerConfig(g, tc, "mem://", 0, &devOptions{httpPort: free})
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(free)), cfg.Listen, "a free port is kept")
}
