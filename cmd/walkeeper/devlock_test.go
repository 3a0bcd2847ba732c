package main

import (
	"errors"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDevLockRefusesSecond takes the data directory's lock twice in one process (flock
// locks belong to open files, so the two attempts conflict as two processes would): the
// second is refused naming the first holder; after release the directory is free again.
func TestDevLockRefusesSecond(t *testing.T) {
	dir := t.TempDir()
	first := lockHolder{PID: 4242, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local), Command: "walkeeper dev --workers 3"}
	l1, err := lockDataDir(dir, first)
	require.NoError(t, err)
	assert.True(t, dataDirInUse(dir))

	_, err = lockDataDir(dir, currentHolder())
	var locked *dirLockedError
	require.True(t, errors.As(err, &locked), "got %v", err)
	assert.Equal(t, first.PID, locked.holder.PID)
	assert.True(t, first.Started.Equal(locked.holder.Started))
	assert.Equal(t, first.Command, locked.holder.Command)
	assert.Equal(t, fmt.Sprintf(`data directory %s is in use by walkeeper dev (pid 4242, started 2026-01-02 03:04:05, command "walkeeper dev --workers 3"); stop it first, or pass --data DIR for a second one`, dir),
		err.Error())
	assert.True(t, dataDirInUse(dir), "the refused attempt must not disturb the holder")

	l1.Release()
	assert.False(t, dataDirInUse(dir))
	l2, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	l2.Release()
}

// TestDevRefusedBeforeTemporalStarts runs `walkeeper dev` on a directory whose lock is held:
// it exits 1 with the holder named on the first line and starts nothing (no Temporal
// database, log or state file appears).
func TestDevRefusedBeforeTemporalStarts(t *testing.T) {
	dir := t.TempDir()
	holder := currentHolder()
	l, err := lockDataDir(dir, holder)
	require.NoError(t, err)
	defer l.Release()
	code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", "/nonexistent/temporal")
	assert.Equal(t, cli.ExitFailure, code)
	assert.Equal(t, fmt.Sprintf("walkeeper: data directory %s is in use by walkeeper dev (%s); stop it first, or pass --data DIR for a second one", dir, holder),
		firstLine(errOut))
	for _, f := range []string{"temporal.db", "temporal.log", devStateFile, devLogFile} {
		_, err := os.Stat(filepath.Join(dir, f))
		assert.True(t, os.IsNotExist(err), "%s exists: %v", f, err)
	}
}

// TestDevStateOnlyWhileLocked: dev.json is read only while its dev holds the lock.
func TestDevStateOnlyWhileLocked(t *testing.T) {
	dir := t.TempDir()
	st := devState{lockHolder: lockHolder{PID: 7}, Storage: "file:///s", Temporal: "127.0.0.1:7999", Namespace: "ns", UI: "http://127.0.0.1:8999"}
	require.NoError(t, writeDevState(dir, st))
	_, ok := readDevState(dir)
	assert.False(t, ok, "no lock held: a stale dev.json")
	l, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	got, ok := readDevState(dir)
	assert.True(t, ok)
	assert.Equal(t, st, got)
	assert.Equal(t, "http://127.0.0.1:8999", uiBaseOrDev("", got))
	assert.Equal(t, "http://x", uiBaseOrDev("http://x", got))
	l.Release()
	assert.Equal(t, defaultUIURL, uiBaseOrDev("", devState{}))
}
