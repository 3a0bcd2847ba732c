package main

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/walkeeper/walkeeper/internal/cli"
)

// TestCommandsCreateNoStorageRoot: a command that reads --storage, or changes stores in it,
// refuses a file:// root that does not exist with exit 2 and one line naming it, and creates
// nothing; Temporal is unreachable, so a command that went on would print another line.
func TestCommandsCreateNoStorageRoot(t *testing.T) {
	noDev(t)
	parent := t.TempDir()
	root := filepath.Join(parent, "no", "storage")
	storage := "file://" + filepath.ToSlash(root)
	for _, args := range [][]string{
		{"status"},
		{"status", "generic:a"},
		{"merge", "generic:a"},
		{"compact", "generic:a"},
		{"quarantine", "generic:a", "generic/a/data/x.parquet", "--reason", "r"},
	} {
		code, out, errOut := runCLI(t, append(args, "--storage", storage, "--temporal", "127.0.0.1:1")...)
		assert.Equal(t, cli.ExitUsage, code, "walkeeper %v: %s", args, errOut)
		assert.Equal(t, fmt.Sprintf("walkeeper: --storage: storage url %q: root %q does not exist\n", storage, root), errOut,
			"walkeeper %v", args)
		assert.NotContains(t, out, "Stores", "walkeeper %v", args)
	}
	_, err := os.Stat(filepath.Join(parent, "no"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a command created the storage root")
}

// TestWorkerStorageThatCannotBeADirectoryIsBadUsage: worker refuses a file:// root that is a
// file, lies under one or is a dangling symlink with exit 2 and one line naming it escaped,
// before Temporal is dialed (it is unreachable here, so a worker that went on would say that),
// and writes nothing; a root that does not exist is still the worker's to create.
func TestWorkerStorageThatCannotBeADirectoryIsBadUsage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file\x1b[31m")
	assert.NoError(t, os.WriteFile(file, []byte("keep me"), 0o600))
	dangling := filepath.Join(dir, "dangling")
	assert.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	before, _ := os.ReadDir(dir)
	for root, why := range map[string]string{
		file:                         fmt.Sprintf("root %q is not a directory", file),
		filepath.Join(file, "under"): fmt.Sprintf("root %q: %q is not a directory", filepath.Join(file, "under"), file),
		dangling:                     fmt.Sprintf("root %q is not a directory", dangling),
	} {
		storage := (&url.URL{Scheme: "file", Path: filepath.ToSlash(root)}).String()
		code, _, errOut := runCLI(t, "worker", "--storage", storage, "--listen", "127.0.0.1:0",
			"--temporal", "127.0.0.1:1", "--temporal-wait", "0s")
		assert.Equal(t, cli.ExitUsage, code, "%q: %s", root, errOut)
		assert.Equal(t, fmt.Sprintf("walkeeper: --storage: storage url %q: %s (see 'walkeeper worker --help')\n", storage, why), errOut)
	}
	after, _ := os.ReadDir(dir)
	assert.Equal(t, before, after, "worker wrote beside its storage root")
	b, _ := os.ReadFile(file)
	assert.Equal(t, "keep me", string(b))
}

// TestWorkerStorageThatCannotBeCreatedIsBadUsage: a file:// root the file system will not make
// is refused with exit 2 and one line naming where, escaped, before Temporal is dialed (it is
// unreachable here, so a worker that went on would say that): /proc answers the mkdir with
// ENOENT, and a parent the worker may not write (tried for real only when not root) with
// EACCES. A root that can be made is made before the dial.
func TestWorkerStorageThatCannotBeCreatedIsBadUsage(t *testing.T) {
	worker := func(root string) (int, string, string) {
		storage := (&url.URL{Scheme: "file", Path: filepath.ToSlash(root)}).String()
		code, _, errOut := runCLI(t, "worker", "--storage", storage, "--listen", "127.0.0.1:0",
			"--temporal", "127.0.0.1:1", "--temporal-wait", "0s")
		return code, storage, errOut
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		parent := "/proc/walkeeper-nonexistent\x1b[31m"
		code, storage, errOut := worker(parent + "/x")
		assert.Equal(t, cli.ExitUsage, code, errOut)
		assert.Equal(t, fmt.Sprintf("walkeeper: --storage: storage url %q: root %q: %q cannot be created (no such file or directory) (see 'walkeeper worker --help')\n",
			storage, parent+"/x", parent), errOut)
	}
	made := filepath.Join(t.TempDir(), "made")
	code, _, errOut := worker(made)
	assert.Equal(t, cli.ExitFailure, code, errOut)
	assert.Contains(t, errOut, "dial temporal")
	st, err := os.Stat(made)
	assert.True(t, err == nil && st.IsDir(), "the root was not made before the dial: %v", err)

	if os.Geteuid() == 0 {
		t.Log("running as root: a parent without write permission cannot be tried for real")
		return
	}
	ro := filepath.Join(t.TempDir(), "ro")
	assert.NoError(t, os.Mkdir(ro, 0o500))
	code, storage, errOut := worker(filepath.Join(ro, "x"))
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.Equal(t, fmt.Sprintf("walkeeper: --storage: storage url %q: root %q cannot be created (permission denied) (see 'walkeeper worker --help')\n",
		storage, filepath.Join(ro, "x")), errOut)
}
