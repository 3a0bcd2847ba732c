// Package testbin finds the server binaries that scripts/install-*.sh build into
// <module root>/.cache/bin, with the version each was built at, and waits for a started one to
// serve, for the test harnesses that start real servers (testservers, temporalcluster,
// walkeeperproc) and for the benchmarks.
package testbin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/proc"
)

// ErrNotInstalled is returned by Find when a binary is neither in .cache/bin nor on PATH.
var ErrNotInstalled = errors.New("not installed")

// Tool names one installable binary: its file name in .cache/bin and the script that puts
// it there.
type Tool struct {
	Name   string // file name in .cache/bin, e.g. "minio"
	Script string // installer, relative to the module root, e.g. "scripts/install-minio.sh"
	EnvVar string // overrides the location, e.g. "WALKEEPER_MINIO_BIN"; "" = none
}

// Find returns the path of t's binary: $EnvVar when set (it must be executable), else
// <module root>/.cache/bin/<Name>, else <Name> on PATH. The error wraps ErrNotInstalled and
// names the script that installs it.
func Find(t Tool) (string, error) {
	if p := os.Getenv(t.EnvVar); p != "" { // os.Getenv("") is ""
		if !cachebin.IsExecutable(p) {
			return "", fmt.Errorf("%s=%s: not an executable file", t.EnvVar, p)
		}
		return p, nil
	}
	if dir, err := dir(); err == nil {
		if p := filepath.Join(dir, t.Name); cachebin.IsExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(t.Name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s: %w (run %s)", t.Name, ErrNotInstalled, t.Script)
}

// Version returns the version recorded for t by its installer (.cache/bin/.<Name>.version),
// or "" when the binary was not installed by the project's scripts.
func Version(t Tool) string {
	dir, err := dir()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, "."+t.Name+".version"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// dir is <module root>/.cache/bin.
func dir() (string, error) {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin"), nil
}

// Missing ends t (a test) for a binary that is not installed (err from Find): a skip on a
// developer's machine, a failure under CI (env CI set), where every suite must run in full.
func Missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%v; CI is set, so this must run (scripts/install-servers.sh installs every server)", err)
	}
	t.Skipf("%v; skipped because CI is unset", err)
}

// TempDir is a fresh directory for t's server, removed when t ends unless t failed, when its
// log says where it is kept. Not t.TempDir: a server may still be writing while the test's
// own clean-up runs, and a failed run keeps the server's files.
func TempDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walkeeper-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: files kept in %s", name, dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	return dir
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// WaitTCP waits until addr accepts a TCP connection, p exits, or timeout passes.
func WaitTCP(p *proc.Proc, addr string, timeout time.Duration) error {
	return p.WaitFor(context.Background(), timeout, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// WaitHTTP waits until a GET of url answers 200 OK, p exits, or timeout passes.
func WaitHTTP(p *proc.Proc, url string, timeout time.Duration) error {
	c := http.Client{Timeout: 5 * time.Second}
	return p.WaitFor(context.Background(), timeout, func() error {
		res, err := c.Get(url)
		if err != nil {
			return err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, res.Status)
		}
		return nil
	})
}
