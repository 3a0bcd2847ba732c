package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/internal/proc"
)

// devLockFile is the lock `walkeeper dev` holds on its data directory while it runs, taken
// before Temporal starts: two dev servers on one SQLite file stall each other and two sets of
// workers share shards.
const devLockFile = "dev.lock"

// lockHolder is who holds a data directory, written into the lock file by the holder so
// that a refused second dev can name it.
type lockHolder struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Command string    `json:"command"`
}

func (h lockHolder) String() string {
	s := fmt.Sprintf("pid %d", h.PID)
	if !h.Started.IsZero() {
		s += ", started " + h.Started.Local().Format(time.DateTime)
	}
	if h.Command != "" {
		s += fmt.Sprintf(", command %q", h.Command)
	}
	return s
}

// currentHolder describes this process.
func currentHolder() lockHolder {
	return lockHolder{PID: os.Getpid(), Started: time.Now(), Command: strings.Join(os.Args, " ")}
}

// dirLockedError says the data directory is held by another process.
type dirLockedError struct {
	dir    string
	holder *lockHolder // nil when the lock file names none
}

func (e *dirLockedError) Error() string {
	who := "another process"
	if e.holder != nil {
		who = "walkeeper dev (" + e.holder.String() + ")"
	}
	return fmt.Sprintf("data directory %s is in use by %s; stop it first, or pass --data DIR for a second one", contract.Printable(e.dir), who)
}

// lockDataDir takes the lock on dir for holder without waiting: a flock(2) on the returned
// file, which closing it drops, as the kernel does however the process dies, so a crashed dev
// never leaves a stale lock. It fails with a *dirLockedError naming the holder when another
// open lock file holds it.
func lockDataDir(dir string, holder lockHolder) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, dataDirError(dir, err)
	}
	path := filepath.Join(dir, devLockFile)
	f, err := proc.OpenRegular(path, os.O_CREATE|os.O_RDWR, 0o644)
	if errors.Is(err, proc.ErrNotRegular) {
		return nil, cli.Usagef("lock %s: %w; remove it, or pass --data DIR", contract.Printable(path), printable(err))
	}
	if err != nil {
		return nil, dataDirError(dir, err)
	}
	// A reader's probe (dataDirInUse) holds the lock shared for an instant: retry briefly
	// before calling the directory taken.
	for attempt := 0; ; attempt++ {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || attempt == 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		h := readHolder(f)
		_ = f.Close()
		return nil, &dirLockedError{dir: dir, holder: h}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", contract.Printable(path), printable(err))
	}
	// We hold it: replace the previous holder's description with ours.
	b, _ := json.Marshal(holder)
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: write holder: %w", contract.Printable(path), printable(err))
	}
	return f, nil
}

// dataDirError says why dir cannot be made or locked. A path that cannot be a data directory
// (a file, a FIFO, a dangling symlink or a file among its parents; no permission; a read-only
// file system; a file system that makes no directory there, as /proc answers a mkdir with
// ENOENT) is bad usage, since another --data fixes it; any other error is a failure.
func dataDirError(dir string, err error) error {
	var pe *fs.PathError
	var errno syscall.Errno
	if !errors.As(err, &pe) || !errors.As(err, &errno) {
		return fmt.Errorf("data dir: %w", printable(err))
	}
	why := errno.Error()
	switch errno {
	case syscall.ENOTDIR, syscall.EEXIST: // EEXIST: MkdirAll met a dangling symlink
		why = "not a directory"
	case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENAMETOOLONG, syscall.ELOOP:
		// errno's own words say it
	case syscall.ENOENT:
		if pe.Op != "mkdir" { // the directory vanished under the lock's open: a failure
			return fmt.Errorf("data dir: %w", printable(err))
		}
		// MkdirAll makes every missing parent, so only the file system can answer this.
		why = "cannot be created (" + why + ")"
	default:
		return fmt.Errorf("data dir: %w", printable(err))
	}
	if pe.Path != dir {
		why = contract.Printable(pe.Path) + ": " + why // a parent, or the lock file
	}
	return cli.Usagef("--data %s: %s", contract.Printable(dir), why)
}

// readHolder is the holder the lock file f names, nil when it names none.
func readHolder(f *os.File) *lockHolder {
	var h lockHolder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 4096))
	if err != nil || json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}

// dataDirInUse reports whether a live dev holds dir by trying the lock and dropping it at
// once, to tell a running dev's state file from a stale one.
func dataDirInUse(dir string) bool {
	f, err := proc.OpenRegular(filepath.Join(dir, devLockFile), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close() // drops the shared lock if it was taken
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}
