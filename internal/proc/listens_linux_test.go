package proc

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// listenChildEnv makes the test binary a child that listens on the port it names.
const listenChildEnv = "WALKEEPER_PROC_LISTEN_CHILD"

func TestMain(m *testing.M) {
	if port := os.Getenv(listenChildEnv); port != "" {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			os.Exit(3)
		}
		defer l.Close()
		time.Sleep(time.Minute)
		return
	}
	os.Exit(m.Run())
}

// Listens tells a process's own server from another process's on the same port: a readiness
// probe that dials a picked port must not take a server that got the port first for its own.
func TestListensTellsWhoseServerHoldsAPort(t *testing.T) {
	ports, err := FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{Path: os.Args[0], Env: []string{listenChildEnv + "=" + strconv.Itoa(ports[0])}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(syscall.SIGKILL, time.Second) }()
	if err := p.WaitFor(t.Context(), time.Minute, func() error {
		c, err := net.Dial("tcp", Addr(ports[0]))
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !p.Listens(ports[0]) {
		t.Fatalf("the child listens on %d, Listens says no", ports[0])
	}
	if p.Listens(ports[1]) {
		t.Fatalf("nothing listens on %d, Listens says the child does", ports[1])
	}

	// This process's listener on a port is not the child's.
	l, err := net.Listen("tcp", Addr(ports[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if p.Listens(ports[1]) {
		t.Fatalf("the test listens on %d, Listens says the child does", ports[1])
	}
}
