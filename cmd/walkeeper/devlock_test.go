package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cli"

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

	l1.Close()
	assert.False(t, dataDirInUse(dir))
	l2, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	l2.Close()
}

// failingCLI is a Temporal CLI that exits 1 at once: a dev that got as far as starting the dev
// server with it says so, and leaves a temporal.log.
func failingCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("false")
	require.NoError(t, err)
	return p
}

// TestDevRefusedBeforeTemporalStarts runs `walkeeper dev` on a directory whose lock is held:
// it exits 1 with the holder named on the first line and starts nothing (no Temporal
// database, log or state file appears).
func TestDevRefusedBeforeTemporalStarts(t *testing.T) {
	dir := t.TempDir()
	holder := currentHolder()
	l, err := lockDataDir(dir, holder)
	require.NoError(t, err)
	defer l.Close()
	code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", failingCLI(t))
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
	l.Close()
	assert.Equal(t, defaultUIURL, uiBaseOrDev("", devState{}))
}

// returnsSoon runs f and fails t if it blocks: a FIFO opened for reading waits for a writer
// forever, which is the defect these checks guard against, not a matter of speed.
func returnsSoon(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s blocks", what)
	}
}

// A dev.json that is not a small regular file is ignored, never read whole and never waited on:
// a FIFO, a directory, a symlink (dev writes the file by rename, never as a link), a file over
// devStateMaxBytes (padded valid JSON) and invalid JSON.
func TestDevStateHostileFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	defer l.Close()
	st := devState{lockHolder: lockHolder{PID: 7}, Temporal: "127.0.0.1:7999", Namespace: "ns"}
	good := filepath.Join(t.TempDir(), "good.json")
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(good, b, 0o600))
	path := filepath.Join(dir, devStateFile)
	for name, make := range map[string]func() error{
		"fifo":         func() error { return syscall.Mkfifo(path, 0o600) },
		"directory":    func() error { return os.Mkdir(path, 0o700) },
		"symlink":      func() error { return os.Symlink(good, path) },
		"invalid json": func() error { return os.WriteFile(path, []byte(`{"temporal":`), 0o600) },
		"huge": func() error {
			return os.WriteFile(path, append(bytes.Repeat([]byte(" "), devStateMaxBytes), b...), 0o600)
		},
	} {
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, make(), name)
		returnsSoon(t, name, func() {
			_, ok := readDevState(dir)
			assert.False(t, ok, name)
		})
	}
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, writeDevState(dir, st))
	_, ok := readDevState(dir)
	assert.True(t, ok, "a state file written by dev is read")
}

// A dev.lock that is not a regular file refuses `walkeeper dev` with a one-line error and exit
// 2, before anything starts, and neither dev nor a reader waits on it or writes through it: a
// FIFO, a directory, and a symlink, whose target keeps its content.
func TestDevLockHostileFiles(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))
	for name, make := range map[string]func(path string) error{
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
		"symlink":   func(p string) error { return os.Symlink(victim, p) },
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, devLockFile)
		require.NoError(t, make(path), name)
		returnsSoon(t, name, func() {
			assert.False(t, dataDirInUse(dir), name)
			_, err := lockDataDir(dir, currentHolder())
			assert.True(t, cli.IsUsageError(err), "%s: %v", name, err)
			code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", failingCLI(t))
			assert.Equal(t, cli.ExitUsage, code, name)
			assert.Contains(t, firstLine(errOut), devLockFile, name)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "%s: %s", name, errOut)
		})
		_, err := os.Stat(filepath.Join(dir, devLogFile))
		assert.True(t, os.IsNotExist(err), "%s: the log was opened", name)
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b), "a symlinked dev.lock was written through")
}

// A walkeeper.log or temporal.log that is a FIFO or a symlink refuses dev with exit 2 rather
// than block on the FIFO (deaf to Ctrl-C, in open(2)) or append to the link's target. A CLI
// that exists lets dev reach the point where the dev server would open its log.
func TestDevLogHostileFiles(t *testing.T) {
	fakeCLI, err := exec.LookPath("true")
	require.NoError(t, err)
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))
	for _, file := range []string{devLogFile, devTemporalLogFile} {
		for name, make := range map[string]func(path string) error{
			"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
			"symlink": func(p string) error { return os.Symlink(victim, p) },
		} {
			dir := t.TempDir()
			require.NoError(t, make(filepath.Join(dir, file)), name)
			returnsSoon(t, file+" "+name, func() {
				code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", fakeCLI, "--demo=false")
				assert.Equal(t, cli.ExitUsage, code, "%s %s: %s", file, name, errOut)
				assert.Contains(t, firstLine(errOut), file, name)
			})
		}
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b), "a symlinked log was written through")
}

// A dev.json that dev could not have written is ignored even while the lock is held, so that
// client commands neither print its escape sequences, nor blame its values on --temporal or
// --storage, nor open a storage of another scheme with the caller's credentials.
func TestDevStateHostileValues(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	defer l.Close()
	good := devState{lockHolder: lockHolder{PID: 7}, Storage: "file:///s", Temporal: "127.0.0.1:7999",
		Namespace: "ns", UI: "http://127.0.0.1:8999", HTTP: []string{"http://127.0.0.1:8081"}}
	for name, edit := range map[string]func(st *devState){
		"escape in namespace":  func(st *devState) { st.Namespace = "ns\x1b]0;title\a" },
		"escape in ui":         func(st *devState) { st.UI = "http://x\x1b[31m" },
		"escape in http":       func(st *devState) { st.HTTP = []string{"http://y\x1b[5m"} },
		"escape in temporal":   func(st *devState) { st.Temporal = "evil\x1b[31m:7233" },
		"temporal not an addr": func(st *devState) { st.Temporal = "nowhere" },
		"storage of s3":        func(st *devState) { st.Storage = "s3://other-bucket" },
		"storage not a url":    func(st *devState) { st.Storage = "file:///s\x1b[2J" },
		"ui of another scheme": func(st *devState) { st.UI = "javascript:alert(1)" },
	} {
		st := good
		edit(&st)
		require.NoError(t, writeDevState(dir, st), name)
		_, ok := readDevState(dir)
		assert.False(t, ok, name)
	}
	require.NoError(t, writeDevState(dir, good))
	got, ok := readDevState(dir)
	assert.True(t, ok)
	assert.Equal(t, good, got)

	bad := good
	bad.Namespace, bad.UI = "ns\x1b]0;title\a", "http://x\x1b[31m"
	require.NoError(t, writeDevState(dir, bad))
	t.Setenv(devDataEnv, dir)
	code, out, errOut := runCLI(t, "queries")
	assert.Equal(t, cli.ExitOK, code, errOut)
	assert.NotContains(t, out, "\x1b", "an escape sequence of dev.json was printed")
}

// TestDevDataThatCannotBeADirectoryIsBadUsage: a --data that is a file, a FIFO, a symlink to a
// file or to nothing, or a path under a file stops dev with exit 2 and one line naming it, its
// control characters escaped, before Temporal starts (the Temporal CLI named exits at once,
// so starting it would say so) and with nothing written.
func TestDevDataThatCannotBeADirectoryIsBadUsage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file\x1b[31m")
	require.NoError(t, os.WriteFile(file, []byte("keep me"), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Symlink(file, filepath.Join(dir, "to-file")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")))
	before, err := os.ReadDir(dir)
	require.NoError(t, err)
	printableFile := filepath.Join(dir, `file\x1b[31m`)
	for data, why := range map[string]string{
		file:                           printableFile + ": not a directory",
		fifo:                           fifo + ": not a directory",
		filepath.Join(dir, "to-file"):  filepath.Join(dir, "to-file") + ": not a directory",
		filepath.Join(dir, "dangling"): filepath.Join(dir, "dangling") + ": not a directory",
		filepath.Join(file, "under"):   filepath.Join(printableFile, "under") + ": " + printableFile + ": not a directory",
	} {
		returnsSoon(t, data, func() {
			code, _, errOut := runCLI(t, "dev", "--data", data, "--temporal-cli", failingCLI(t), "--demo=false")
			assert.Equal(t, cli.ExitUsage, code, "%q: %s", data, errOut)
			assert.Equal(t, "walkeeper: --data "+why+" (see 'walkeeper dev --help')\n", errOut, "%q", data)
		})
	}
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, before, after, "dev wrote into the data directory's parent")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b))
}

// A --data dev may not write is bad usage too; root may write anywhere, so the errors are made
// by hand, and for real when the test does not run as root.
func TestDevDataWithoutPermissionIsBadUsage(t *testing.T) {
	err := dataDirError("/d", &fs.PathError{Op: "open", Path: "/d/dev.lock", Err: syscall.EACCES})
	assert.True(t, cli.IsUsageError(err), "%v", err)
	assert.Equal(t, "--data /d: /d/dev.lock: permission denied", err.Error())
	err = dataDirError("/d", &fs.PathError{Op: "mkdir", Path: "/d", Err: syscall.EROFS})
	assert.True(t, cli.IsUsageError(err), "%v", err)
	assert.Equal(t, "--data /d: read-only file system", err.Error())
	err = dataDirError("/d", &fs.PathError{Op: "mkdir", Path: "/d", Err: syscall.EIO})
	assert.False(t, cli.IsUsageError(err), "an I/O error is a failure, not bad usage: %v", err)

	if os.Geteuid() == 0 {
		t.Log("running as root: a directory without permission cannot be tried for real")
		return
	}
	ro := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(ro, 0o500))
	for _, data := range []string{ro, filepath.Join(ro, "sub")} {
		code, _, errOut := runCLI(t, "dev", "--data", data, "--temporal-cli", failingCLI(t), "--demo=false")
		assert.Equal(t, cli.ExitUsage, code, "%q: %s", data, errOut)
		assert.Contains(t, errOut, "permission denied", data)
	}
}

// A --data the file system makes no directory at is bad usage: /proc answers a mkdir with
// ENOENT, which MkdirAll cannot mean otherwise, since it makes every missing parent. ENOENT on
// the lock file's open is the directory vanishing meanwhile, a failure.
func TestDevDataThatCannotBeCreatedIsBadUsage(t *testing.T) {
	err := dataDirError("/d/x", &fs.PathError{Op: "mkdir", Path: "/d", Err: syscall.ENOENT})
	assert.True(t, cli.IsUsageError(err), "%v", err)
	assert.Equal(t, "--data /d/x: /d: cannot be created (no such file or directory)", err.Error())
	err = dataDirError("/d", &fs.PathError{Op: "open", Path: "/d/dev.lock", Err: syscall.ENOENT})
	assert.False(t, cli.IsUsageError(err), "%v", err)

	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here")
	}
	parent := "/proc/walkeeper-nonexistent\x1b[31m"
	code, out, errOut := runCLI(t, "dev", "--data", parent+"/x", "--temporal-cli", failingCLI(t), "--demo=false")
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Equal(t, `walkeeper: --data /proc/walkeeper-nonexistent\x1b[31m/x: /proc/walkeeper-nonexistent\x1b[31m: `+
		"cannot be created (no such file or directory) (see 'walkeeper dev --help')\n", errOut)
}

// Every dev message naming a --data path a newline or an escape sequence is in says it whole
// on its one line, escaped: refused files in it, a directory in use, a dev server that does not
// start, the banner; and errorLine escapes whatever a message let through.
func TestDevMessagesEscapePaths(t *testing.T) {
	fakeCLI, err := exec.LookPath("true")
	require.NoError(t, err)
	hostile := func(t *testing.T) (dir, said string) {
		dir = filepath.Join(t.TempDir(), "d\x1b[31m\nforged")
		require.NoError(t, os.Mkdir(dir, 0o700))
		return dir, strings.ReplaceAll(strings.ReplaceAll(dir, "\x1b", `\x1b`), "\n", `\n`)
	}
	oneEscapedLine := func(t *testing.T, errOut, want string) {
		t.Helper()
		assert.True(t, strings.HasSuffix(errOut, "\n"), "%q", errOut)
		line := strings.TrimSuffix(errOut, "\n")
		assert.False(t, strings.ContainsFunc(line, func(r rune) bool { return r < ' ' || r == 0x7f }), "%q", errOut)
		assert.Contains(t, line, want)
	}
	for name, c := range map[string]struct {
		file, cli string
		make      func(path string) error
		code      int
	}{
		"lock fifo":        {devLockFile, fakeCLI, func(p string) error { return syscall.Mkfifo(p, 0o600) }, cli.ExitUsage},
		"log symlink":      {devLogFile, fakeCLI, func(p string) error { return os.Symlink("/nonexistent", p) }, cli.ExitUsage},
		"temporal log dir": {devTemporalLogFile, fakeCLI, func(p string) error { return os.Mkdir(p, 0o700) }, cli.ExitUsage},
		"CLI fails":        {"", failingCLI(t), nil, cli.ExitFailure},
	} {
		t.Run(name, func(t *testing.T) {
			dir, said := hostile(t)
			if c.make != nil {
				require.NoError(t, c.make(filepath.Join(dir, c.file)))
			}
			returnsSoon(t, name, func() {
				code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", c.cli, "--demo=false")
				assert.Equal(t, c.code, code, errOut)
				oneEscapedLine(t, errOut, said+"/"+cmp.Or(c.file, devTemporalLogFile))
			})
		})
	}
	t.Run("in use", func(t *testing.T) {
		dir, said := hostile(t)
		l, err := lockDataDir(dir, currentHolder())
		require.NoError(t, err)
		defer l.Close()
		code, _, errOut := runCLI(t, "dev", "--data", dir, "--temporal-cli", fakeCLI)
		assert.Equal(t, cli.ExitFailure, code, errOut)
		oneEscapedLine(t, errOut, "data directory "+said+" is in use")
	})
	t.Run("banner", func(t *testing.T) {
		dir, said := hostile(t)
		var out bytes.Buffer
		st := devState{Storage: "file:///s", Temporal: "127.0.0.1:7233", Namespace: "default", UI: "http://127.0.0.1:8233",
			TemporalCLI: filepath.Join(dir, "temporal"), Log: filepath.Join(dir, devLogFile)}
		printDevBanner(&out, st, dir, nil, &devOptions{})
		assert.NotContains(t, out.String(), "\x1b")
		assert.NotContains(t, out.String(), "\nforged")
		for _, want := range []string{said + "/" + devTemporalLogFile, said + "/" + devLogFile, said + "/temporal workflow list"} {
			assert.Contains(t, out.String(), want)
		}
	})
	assert.Equal(t, `bad \x1b[2J name`, errorLine(errors.New("bad \x1b[2J name\nsecond line")))
	err = dataDirError("/d\n\x1b", &fs.PathError{Op: "mkdir", Path: "/d\n\x1b", Err: syscall.EIO})
	assert.Equal(t, `data dir: mkdir /d\n\x1b: input/output error`, errorLine(err))
}

// A --temporal-cli, or a $WALKEEPER_TEMPORAL_CLI, that names no executable file (nothing, a
// directory, a file without an execute bit) is bad usage: exit 2 and one line naming the flag
// and the path, escaped, before the data directory is made, locked or written.
func TestDevTemporalCLIThatIsNoExecutableIsBadUsage(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "temporal\x1b[31m")
	require.NoError(t, os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o600))
	said := filepath.Join(dir, `temporal\x1b[31m`)
	for path, why := range map[string]string{
		filepath.Join(dir, "missing"): filepath.Join(dir, "missing") + ": no such file or directory",
		dir:                           dir + ": is a directory",
		noExec:                        said + ": not executable",
	} {
		data := filepath.Join(t.TempDir(), "data")
		code, out, errOut := runCLI(t, "dev", "--data", data, "--temporal-cli", path, "--demo=false")
		assert.Equal(t, cli.ExitUsage, code, "%q: %s", path, errOut)
		assert.Empty(t, out, path)
		assert.Equal(t, "walkeeper: --temporal-cli "+why+"; want the Temporal CLI binary (see 'walkeeper dev --help')\n", errOut, "%q", path)
		_, err := os.Stat(data)
		assert.True(t, os.IsNotExist(err), "%q: the data directory was made: %v", path, err)
	}
	t.Setenv("WALKEEPER_TEMPORAL_CLI", noExec)
	code, _, errOut := runCLI(t, "dev", "--data", filepath.Join(t.TempDir(), "data"), "--demo=false")
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.Equal(t, "walkeeper: $WALKEEPER_TEMPORAL_CLI "+said+": not executable; want the Temporal CLI binary (see 'walkeeper dev --help')\n", errOut)
}

// A <data>/storage that cannot be the workers' file:// root (a file, a FIFO, a symlink to a
// file or to nothing) stops dev with exit 2 and one line naming it, escaped, with the other
// --data checks: before Temporal starts and before the log is opened, not once the first
// worker opens its storage.
func TestDevStorageThatCannotBeADirectoryIsBadUsage(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))
	for name, make := range map[string]func(path string) error{
		"file":     func(p string) error { return os.WriteFile(p, []byte("keep me"), 0o600) },
		"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"to file":  func(p string) error { return os.Symlink(victim, p) },
		"dangling": func(p string) error { return os.Symlink(filepath.Join(filepath.Dir(p), "nowhere"), p) },
	} {
		data := filepath.Join(t.TempDir(), "d\x1b[31m")
		require.NoError(t, os.Mkdir(data, 0o700))
		require.NoError(t, make(filepath.Join(data, "storage")), name)
		said := strings.ReplaceAll(data, "\x1b", `\x1b`)
		returnsSoon(t, name, func() {
			code, out, errOut := runCLI(t, "dev", "--data", data, "--temporal-cli", failingCLI(t), "--demo=false")
			assert.Equal(t, cli.ExitUsage, code, "%s: %s", name, errOut)
			assert.Empty(t, out, name)
			assert.Equal(t, "walkeeper: --data "+said+": "+said+"/storage: not a directory (see 'walkeeper dev --help')\n", errOut, name)
		})
		for _, f := range []string{devTemporalLogFile, "temporal.db", devLogFile, devStateFile, "nowhere"} {
			_, err := os.Lstat(filepath.Join(data, f))
			assert.True(t, os.IsNotExist(err), "%s: %s exists: %v", name, f, err)
		}
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b))
}
