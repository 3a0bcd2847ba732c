// Package cachebin finds the server binaries that scripts/install-*.sh build into
// <module root>/.cache/bin, and the version each was built at, for the test harnesses that
// start real servers (internal/testkit/testservers, internal/testkit/temporalcluster) and for
// internal/devserver. It imports no testing package, so the walkeeper binary may link it.
package cachebin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		if !IsExecutable(p) {
			return "", fmt.Errorf("%s=%s: not an executable file", t.EnvVar, p)
		}
		return p, nil
	}
	if dir, err := Dir(); err == nil {
		if p := filepath.Join(dir, t.Name); IsExecutable(p) {
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
	dir, err := Dir()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, "."+t.Name+".version"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Dir is <module root>/.cache/bin.
func Dir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "bin"), nil
}

// ModuleRoot walks up from the working directory (a test runs in its package directory) to
// the directory holding walkeeper's go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module github.com/walkeeper/walkeeper")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cachebin: no walkeeper go.mod above the working directory")
		}
		dir = parent
	}
}

// GoEnv is the Go toolchain's setting key: the environment variable, else `go env key`.
func GoEnv(key string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// IsExecutable reports whether p is a regular file with an execute bit.
func IsExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Missing ends t (a test) for a binary that is not installed (err from Find): a skip on a
// developer's machine, a failure under CI (env CI set), where every suite must run in full.
func Missing(t interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%v; CI is set, so this must run (scripts/install-servers.sh installs every server)", err)
	}
	t.Skipf("%v; skipped because CI is unset", err)
}
