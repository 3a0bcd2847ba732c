// Package cachebin locates the module root, whose .cache/bin holds the binaries that
// scripts/install-*.sh build, and tells an executable file, for internal/devserver and the
// test harnesses (internal/testkit/testbin finds the servers they start).
package cachebin

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

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
