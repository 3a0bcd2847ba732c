// Package testservers starts real object-store servers as child processes for tests, each
// on free loopback ports with its data in a temporary directory, and returns the walkeeper
// storage URL (gocloud form) of a fresh bucket on it:
//
//	minio            s3://BUCKET?endpoint=http://127.0.0.1:PORT&region=us-east-1&use_path_style=true
//	versitygw        the same, on versitygw's posix backend
//	fake-gcs-server  gs://BUCKET                     with STORAGE_EMULATOR_HOST=127.0.0.1:PORT
//	azurite          azblob://CONTAINER?protocol=http&domain=127.0.0.1:PORT
//	                 with Azurite's well-known account devstoreaccount1 and its key
//
// The binaries come from scripts/install-*.sh (<module root>/.cache/bin; see package
// cachebin). A missing binary skips the test with the command that installs it, except
// under CI (env CI set), where every server the matrix names must run: there it fails.
//
// The credentials a URL needs are process environment variables (gocloud reads them there),
// so Start sets them with t.Setenv: a test that starts servers must not call t.Parallel, and
// child processes started with os.Environ() inherit them. Server.Env lists them too.
package testservers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// Kind names a server implementation.
type Kind string

// The servers of the backend matrix (docs/STORAGE.md §3).
const (
	MinIO     Kind = "minio"
	VersityGW Kind = "versitygw"
	FakeGCS   Kind = "fake-gcs-server"
	Azurite   Kind = "azurite"
)

// Backend is one server of the matrix.
type Backend struct {
	Kind  Kind
	Tool  testbin.Tool
	start func(s *Server) error
}

// Start runs the server for t (stopped by t.Cleanup) and returns it with a fresh bucket.
func (b Backend) Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Find(b.Tool)
	if err != nil {
		testbin.Missing(t, err)
	}
	s := &Server{Kind: b.Kind, Version: testbin.Version(b.Tool), bin: bin, dir: testbin.TempDir(t, string(b.Kind))}
	s.log = filepath.Join(s.dir, "server.log")
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("testservers: stop %s: %v", b.Kind, err)
		}
		if t.Failed() && s.p != nil {
			t.Logf("testservers: %s output (log %s):\n%s", b.Kind, s.log, s.p.Output())
		}
	})
	if err := b.start(s); err != nil {
		t.Fatalf("testservers: start %s (%s): %v", b.Kind, bin, err)
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.URL, err = s.NewBucket(ctx, "walkeeper"); err != nil {
		t.Fatalf("testservers: %s: create bucket: %v", b.Kind, err)
	}
	return s
}

// Backends is the object-store matrix: every server walkeeper claims to support.
func Backends() []Backend {
	return []Backend{
		{Kind: MinIO, Tool: testbin.Tool{Name: "minio", Script: "scripts/install-minio.sh", EnvVar: "WALKEEPER_MINIO_BIN"}, start: startMinIO},
		{Kind: VersityGW, Tool: testbin.Tool{Name: "versitygw", Script: "scripts/install-versitygw.sh", EnvVar: "WALKEEPER_VERSITYGW_BIN"}, start: startVersityGW},
		{Kind: FakeGCS, Tool: testbin.Tool{Name: "fake-gcs-server", Script: "scripts/install-fake-gcs-server.sh", EnvVar: "WALKEEPER_FAKE_GCS_SERVER_BIN"}, start: startFakeGCS},
		{Kind: Azurite, Tool: testbin.Tool{Name: "azurite-blob", Script: "scripts/install-azurite.sh", EnvVar: "WALKEEPER_AZURITE_BIN"}, start: startAzurite},
	}
}

// Lookup returns the backend of kind k.
func Lookup(k Kind) (Backend, bool) {
	for _, b := range Backends() {
		if b.Kind == k {
			return b, true
		}
	}
	return Backend{}, false
}

// Server is a running object-store server.
type Server struct {
	Kind    Kind
	Version string   // as recorded by the installer; "" when the binary came from elsewhere
	URL     string   // storage URL of the bucket Start created
	Env     []string // KEY=VALUE pairs the URL needs (set in the test's environment by Start)
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string

	bin, dir, log string
	p             *proc.Proc
	newBucket     func(ctx context.Context, name string) (string, error)
}

// run starts the server's binary with env, listening on n free loopback ports: args builds its
// command line from them and the data directory. It sets Endpoint to the first port's URL
// and returns its host:port.
func (s *Server) run(n int, env []string, args func(ports []int, data string) []string) (string, error) {
	ports, err := proc.FreePorts(n)
	if err != nil {
		return "", err
	}
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", err
	}
	if s.p, err = proc.Start(proc.Spec{Path: s.bin, Args: args(ports, data), Env: env, Log: s.log}); err != nil {
		return "", err
	}
	addr := proc.Addr(ports[0])
	s.Endpoint = "http://" + addr
	return addr, nil
}

// NewBucket creates another bucket (container) named name plus a random suffix and returns
// its storage URL: tests that need an empty root of their own use it.
func (s *Server) NewBucket(ctx context.Context, name string) (string, error) {
	return s.newBucket(ctx, name+"-"+s3test.RandomName())
}

// Stop ends the server. Safe to call twice.
func (s *Server) Stop() error {
	if s.p == nil {
		return nil
	}
	return s.p.Stop(syscall.SIGTERM, 10*time.Second)
}
