package objstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// fileBackend is file:// on the local filesystem rather than gocloud's fileblob, whose
// IfNotExist is stat-then-rename, not atomic even in one process (docs/STORAGE.md §2): a write
// is a fsynced temp file beside its key, published by rename(2) or, create-only, by link(2),
// whose EEXIST is atomic across processes; every path is resolved through an os.Root, so no
// symlink left in the root leads a read, a write or a delete out of it, however it is raced.
type fileBackend struct {
	r       *os.Root    // the absolute root directory, opened once; nil for a URL only checked
	dirMode os.FileMode // directory mode (dir_file_mode, default 0777 before umask)
	noSync  bool        // nosync: skip fsync (tests and throwaway dev data only)
}

func openFileBackend(rawURL string, u *url.URL, mode rootMode) (*fileBackend, error) {
	if u.Host != "" && u.Host != "localhost" && u.Host != "." {
		// "file://.cache/dev/storage" reads as host ".cache": almost always a relative path
		// written without "./". Say which URL was meant rather than guess: a host could also
		// be a mistaken remote share, and a guessed root would create directories.
		return nil, invalidf("storage url %q: file:// takes no host (here %q); for a relative path write file://./%s, for an absolute one file:///<path>",
			rawURL, u.Host, strings.TrimPrefix(u.Host+u.Path, "/"))
	}
	p := u.Path
	if u.Host == "." {
		p = strings.TrimPrefix(p, "/")
	}
	if p == "" {
		return nil, invalidf("storage url %q: empty path", rawURL)
	}
	root, err := filepath.Abs(filepath.FromSlash(p))
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	q := u.Query()
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name != "dir_file_mode" && name != "nosync" {
			return nil, invalidf("storage url %q: unknown parameter %q (file:// takes dir_file_mode and nosync)", rawURL, name)
		}
	}
	dirMode := os.FileMode(0o777)
	if s := q.Get("dir_file_mode"); s != "" {
		// Base 0, as gocloud's fileblob reads it: "0750" is octal, as modes are written.
		m, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return nil, invalidf("storage url %q: dir_file_mode: %v", rawURL, err)
		}
		dirMode = os.FileMode(m)
	}
	noSync, err := parseNoSync(q["nosync"])
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	f := &fileBackend{dirMode: dirMode, noSync: noSync}
	switch mode {
	case checkOnly, createRoot:
		// A root that cannot be a directory is refused before anything is created or dialed:
		// MkdirAll's ENOTDIR or EEXIST would read as a failure, where another URL fixes it.
		if err := checkRootCanBeDir(rawURL, root); err != nil {
			return nil, err
		}
		if mode == checkOnly {
			return f, nil
		}
		if err := os.MkdirAll(root, dirMode); err != nil {
			return nil, rootMkdirError(rawURL, root, err)
		}
	case existingRoot:
		// Stat says what is there, as MkdirAll does: os.OpenRoot of a FIFO would wait for a
		// writer, deaf to signals.
		st, err := os.Stat(root)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, invalidf("storage url %q: root %q does not exist", rawURL, root)
		case errors.Is(err, syscall.ENOTDIR) || err == nil && !st.IsDir():
			return nil, invalidf("storage url %q: root %q is not a directory", rawURL, root)
		case err != nil:
			return nil, fmt.Errorf("storage url %q: root: %w", rawURL, err)
		}
	}
	if f.r, err = os.OpenRoot(root); err != nil {
		return nil, fmt.Errorf("storage url %q: root: %w", rawURL, err)
	}
	return f, nil
}

// checkRootCanBeDir refuses, as ErrInvalidInput, a root that is not a directory or whose
// nearest existing path (itself or an ancestor) is not one: a file, a FIFO, a symlink to
// either or a dangling symlink, which MkdirAll does not follow. It only stats, so a missing
// root is left for OpenBucket to create, and an error it cannot judge (EACCES) for the open.
func checkRootCanBeDir(rawURL, root string) error {
	for p := root; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if p == filepath.Dir(p) {
				return nil
			}
			continue
		}
		if err != nil {
			return nil
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return nil
		}
		if p == root {
			return invalidf("storage url %q: root %q is not a directory", rawURL, root)
		}
		return invalidf("storage url %q: root %q: %q is not a directory", rawURL, root, p)
	}
}

// rootMkdirError says why MkdirAll could not make root. A root the file system will not make
// (no permission, a read-only file system, or ENOENT, which MkdirAll, making every missing
// parent, gets only from a file system that makes no directory there, as /proc) is
// ErrInvalidInput, since another URL fixes it; any other error is a failure.
func rootMkdirError(rawURL, root string, err error) error {
	var pe *fs.PathError
	var errno syscall.Errno
	if !errors.As(err, &pe) || !errors.As(err, &errno) || !slices.Contains(rootRefusals, errno) {
		return fmt.Errorf("storage url %q: root: %w", rawURL, err)
	}
	if pe.Path == root {
		return invalidf("storage url %q: root %q cannot be created (%v)", rawURL, root, errno)
	}
	return invalidf("storage url %q: root %q: %q cannot be created (%v)", rawURL, root, pe.Path, errno)
}

// rootRefusals are the errors of a root the file system will not make (rootMkdirError).
var rootRefusals = []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOENT,
	syscall.ENOTDIR, syscall.EEXIST, syscall.ENAMETOOLONG, syscall.ELOOP}

// parseNoSync reads the nosync parameter's values. Only a value that says yes skips fsync:
// "nosync=0" or "nosync=false" read as skipping it would give up durability on the word no.
func parseNoSync(values []string) (bool, error) {
	switch len(values) {
	case 0:
		return false, nil
	case 1:
		on, err := strconv.ParseBool(values[0])
		if err != nil {
			return false, fmt.Errorf("nosync=%q: want 1 or 0 (true or false)", values[0])
		}
		return on, nil
	}
	return false, fmt.Errorf("nosync is given %d times", len(values))
}

func (f *fileBackend) close() error {
	if f.r == nil {
		return nil
	}
	return f.r.Close()
}

// relPath is key's path relative to the root ("." for "").
func relPath(key string) string {
	if key == "" {
		return "."
	}
	return filepath.FromSlash(key)
}

func (f *fileBackend) get(ctx context.Context, key string, limit int64, alloc Alloc, _ *watchdog) ([]byte, error) {
	fh, err := f.r.OpenFile(relPath(key), os.O_RDONLY|openObjectFlags, 0)
	if err != nil {
		if isNotExist(err) || errors.Is(err, syscall.ENXIO) { // ENXIO: a socket, not an object
			return nil, ErrNotFound
		}
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotFound
	}
	// Objects are never modified in place (only replaced by rename), so the open descriptor
	// reads one complete version even if a put replaces the key meanwhile; its size is
	// known, so read it into one buffer of that size.
	return readSized(fh, st.Size(), limit, alloc)
}

func (f *fileBackend) exists(ctx context.Context, key string) (bool, error) {
	st, err := f.lstat(relPath(key))
	return st != nil && st.Mode().IsRegular(), err
}

// lstat is the root's Lstat of p, nil with no error when nothing is there (isNotExist).
func (f *fileBackend) lstat(p string) (fs.FileInfo, error) {
	st, err := f.r.Lstat(p)
	if isNotExist(err) {
		return nil, nil
	}
	return st, err
}

// put writes data to a temp file in the key's directory and publishes it (publishTemp).
func (f *fileBackend) put(ctx context.Context, key string, data []byte, ifAbsent bool, _ *watchdog) error {
	final := relPath(key)
	if ifAbsent {
		// Fast path for the loser of a race: skip the temp write and its fsync when the name
		// is already taken. Only an optimisation; link(2) below stays the arbiter.
		if st, err := f.r.Lstat(final); err == nil {
			return f.taken(final, st)
		}
	}
	tmp, err := f.writeTemp(filepath.Dir(final), func(fh *os.File) error {
		_, err := fh.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return f.publishTemp(tmp, final, ifAbsent)
}

// putFrom is put for a streamed object; it returns the bytes written.
func (f *fileBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	final := relPath(key)
	var n int64
	tmp, err := f.writeTemp(filepath.Dir(final), func(fh *os.File) error {
		// Large sequential writes: fewer syscalls than the encoder's page-sized writes.
		var out io.Writer = fh
		if !f.noSync {
			out = &writebackWriter{f: fh}
		}
		bw := bufio.NewWriterSize(out, 1<<20)
		cw := &countingWriter{w: bw}
		if err := write(cw); err != nil {
			return err
		}
		n = cw.n
		return bw.Flush()
	})
	if err != nil {
		return 0, err
	}
	return n, f.publishTemp(tmp, final, false)
}

// writebackBytes is how much a streamed temp file is written between two writeback starts.
const writebackBytes = 1 << 20

// writebackWriter writes to a temp file and starts the kernel's writeback every
// writebackBytes (as pebble's bytes-per-sync does), so the fsync before publishing waits for
// the tail instead of the whole file.
type writebackWriter struct {
	f      *os.File
	off    int64 // bytes written
	queued int64 // bytes whose writeback was started
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.queued >= writebackBytes {
		startWriteback(w.f, w.queued, w.off-w.queued)
		w.queued = w.off
	}
	return n, err
}

// publishTemp publishes the complete temp file tmp as final by rename (replace) or hard link
// (create-only), removing tmp in every case.
func (f *fileBackend) publishTemp(tmp, final string, ifAbsent bool) error {
	defer f.r.Remove(tmp) // after a successful rename the name is gone and this is a no-op
	if ifAbsent {
		if err := f.r.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				if st, serr := f.r.Lstat(final); serr == nil {
					return f.taken(final, st)
				}
				return ErrAlreadyExists
			}
			return fmt.Errorf("publish with link(2) (the filesystem must support hard links): %w", err)
		}
	} else if err := f.r.Rename(tmp, final); err != nil {
		return err
	}
	// Make the new directory entry durable; the data itself was fsynced in writeTemp.
	if err := f.syncDir(filepath.Dir(final)); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// writeTemp creates dir if needed and lets fill write a fresh temp file in it, which it then
// fsyncs. A concurrent delete may prune dir between mkdirAll and the create; that is retried.
func (f *fileBackend) writeTemp(dir string, fill func(*os.File) error) (tmp string, _ error) {
	var fh *os.File
	for attempt := 0; ; attempt++ {
		if err := f.mkdirAll(dir); err != nil {
			if isNotExist(err) && attempt < 8 {
				continue
			}
			return "", err
		}
		tmp = filepath.Join(dir, tempPrefix+rand.Text())
		var err error
		fh, err = f.r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			break
		}
		if (isNotExist(err) || errors.Is(err, fs.ErrExist)) && attempt < 8 {
			continue
		}
		return "", err
	}
	err := fill(fh)
	if err == nil && !f.noSync {
		err = fh.Sync() // before publishing: a crash must never expose a name with partial bytes
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = f.r.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// mkdirAll creates dir (relative to the root) and its missing parents, fsyncing the parent
// of each directory it creates so a published object's path survives a crash.
func (f *fileBackend) mkdirAll(dir string) error {
	if dir == "." {
		return nil
	}
	st, err := f.r.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return invalidf("%s is a file, cannot hold objects under it", filepath.Join(f.r.Name(), dir))
	case err == nil:
		return nil
	case !isNotExist(err):
		return err
	}
	parent := filepath.Dir(dir)
	if err := f.mkdirAll(parent); err != nil {
		return err
	}
	if err := f.r.Mkdir(dir, f.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return f.syncDir(parent)
}

// delete removes the file and prunes the directories it leaves empty, so listDirs answers
// as an object store (which has no directories) would.
func (f *fileBackend) delete(ctx context.Context, key string) error {
	p := relPath(key)
	st, err := f.lstat(p)
	if st == nil || st.IsDir() {
		return err // nothing there, or a directory, which is not an object
	}
	if err := f.r.Remove(p); err != nil && !isNotExist(err) {
		return err
	}
	// Prune directories this delete left empty (removing a non-empty one fails, which ends
	// the walk), never a symlink on the way. A concurrent writer that loses its directory
	// retries in writeTemp.
	for dir := filepath.Dir(p); dir != "."; dir = filepath.Dir(dir) {
		if st, err := f.r.Lstat(dir); err != nil || !st.IsDir() || f.r.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func (f *fileBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	d, err := f.openDir(relPath(strings.TrimSuffix(prefix, "/")))
	if d == nil || err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		// Empty directories are pruned by delete, so this normally stops at the first entry.
		err := f.list(ctx, prefix+e.Name()+"/", func(ObjectInfo) error { return errFound })
		if errors.Is(err, errFound) {
			err = fn(e.Name())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errFound stops a listing at the first object.
var errFound = errors.New("found")

func (f *fileBackend) syncDir(dir string) error {
	if f.noSync {
		return nil
	}
	d, err := f.r.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openDir opens the directory dir (relative to the root) for a listing, only if it is one:
// nil with no error when there is none, or a FIFO, which must not be opened for reading.
func (f *fileBackend) openDir(dir string) (*os.File, error) {
	d, err := f.r.OpenFile(dir, os.O_RDONLY|openDirFlags, 0)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return listable(d)
}

// taken is what a create-only write finds at final, taken by st: a lost race when it is an
// object, the root's damage when it is not (a directory, a FIFO, a symlink), said as such
// instead of as a race that every retry loses again.
func (f *fileBackend) taken(final string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return ErrAlreadyExists
	}
	return fmt.Errorf("%s is a %s, not an object: remove it from the storage root", filepath.Join(f.r.Name(), final), fileKind(st.Mode()))
}

// fileKind names what a directory entry that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// isNotExist also treats ENOTDIR as absence ("a/b" is absent when "a" is a file), and ELOOP,
// a symlink loop.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
