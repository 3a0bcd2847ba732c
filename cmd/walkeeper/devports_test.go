package main

import (
	"net"
	"strconv"
	"testing"

	"github.com/walkeeper/walkeeper/worker"
)

// TestDevWorkerPortTakenIsReplaced: a worker port another process holds is replaced with a
// free one (port 0, chosen when the worker listens), and a free port is kept as asked.
func TestDevWorkerPortTakenIsReplaced(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	g := &globalOptions{}
	tc := worker.TemporalConfig{}

	cfg := devWorkerConfig(g, tc, "mem://", 0, &devOptions{httpPort: taken})
	if _, port, _ := net.SplitHostPort(cfg.Listen); port != "0" {
		t.Fatalf("worker port %d is taken, Listen = %q, want port 0 (a free one)", taken, cfg.Listen)
	}

	free := freeLocalPort(t)
	cfg = devWorkerConfig(g, tc, "mem://", 0, &devOptions{httpPort: free})
	if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(free)); cfg.Listen != want {
		t.Fatalf("free port: Listen = %q, want %q", cfg.Listen, want)
	}
}

func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return p
}
