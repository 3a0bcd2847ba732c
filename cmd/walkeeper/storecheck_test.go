package main

import (
	"fmt"
	"io/fs"
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
