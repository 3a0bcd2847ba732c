//go:build unix

package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What a person or a tool leaves in a file:// root that is not a regular file: never an
// object, never an open that waits for ever, never a path out of the root.

// finishOrUnblock runs op and fails the test if it has not returned within a minute, then
// opens every FIFO in fifos for writing so an open stuck on one returns.
func finishOrUnblock(t *testing.T, what string, fifos []string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatalf("%s waited on a FIFO for a minute", what)
		return nil
	}
}

// TestFileBucketFIFOAndSocketAreNotObjects: a FIFO where an object or a listed directory
// should be, and a socket where an object should be, read as absent at once.
func TestFileBucketFIFOAndSocketAreNotObjects(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b := mustOpen(t, fileURL(root)+"?nosync=1")
	mustPut(t, b, "k/object", "x")
	fifoObject := filepath.Join(root, "k", "fifo")
	fifoDir := filepath.Join(root, "k", "dir")
	fifos := []string{fifoObject, fifoDir}
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	sock, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer syscall.Close(sock)
	require.NoError(t, syscall.Bind(sock, &syscall.SockaddrUnix{Name: filepath.Join(root, "k", "sock")}))

	for _, key := range []string{"k/fifo", "k/sock"} {
		err := finishOrUnblock(t, "Get "+key, fifos, func() error {
			_, err := b.Get(ctx, key)
			return err
		})
		require.ErrorIs(t, err, ErrNotFound, "Get(%q)", key)
	}
	for _, prefix := range []string{"k/dir/", "k/dir/x"} {
		var listed []ObjectInfo
		err := finishOrUnblock(t, "ListPageWhere "+prefix, fifos, func() error {
			var err error
			listed, _, err = b.ListPageWhere(ctx, prefix, "", 10, nil)
			return err
		})
		require.NoError(t, err, "ListPageWhere(%q)", prefix)
		require.Empty(t, listed, "ListPageWhere(%q)", prefix)
		err = finishOrUnblock(t, "Walk "+prefix, fifos, func() error {
			return b.Walk(ctx, prefix, func(o ObjectInfo) error { return errors.New("listed " + o.Key) })
		})
		require.NoError(t, err, "Walk(%q)", prefix)
	}
	require.Equal(t, []string{"k/object"}, listKeys(t, b, "k/"))
}

// TestFileBucketSymlinksDoNotLeadOutOfTheRoot: a symlink in the root, to an object or to a
// directory outside it, is never read, written or deleted through (an error, not the outside
// file), and never listed; a symlinked root is the operator's choice and is followed.
func TestFileBucketSymlinksDoNotLeadOutOfTheRoot(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("outside the root"), 0o644))
	realRoot := t.TempDir()
	root := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.Symlink(realRoot, root))
	b := mustOpen(t, fileURL(root)+"?nosync=1")
	mustPut(t, b, "k/object", "x")
	for name, target := range map[string]string{"k/file": secret, "k/dir": outside, "k/zero": "/dev/zero"} {
		require.NoError(t, os.Symlink(target, filepath.Join(realRoot, filepath.FromSlash(name))))
	}

	for _, key := range []string{"k/file", "k/dir/secret", "k/zero"} {
		if got, err := b.Get(ctx, key); err == nil || errors.Is(err, ErrInvalidInput) || got != nil {
			t.Errorf("Get(%q) = %q, %v; want an error other than invalid input", key, got, err)
		}
	}
	for key, wantErr := range map[string]bool{"k/file": false, "k/zero": false, "k/dir/secret": true} {
		if ok, err := b.Exists(ctx, key); ok || (err != nil) != wantErr {
			t.Errorf("Exists(%q) = %v, %v; want false and an error %v", key, ok, err, wantErr)
		}
	}
	for _, prefix := range []string{"k/dir/", "k/dir/s"} {
		if got, _, err := b.ListPageWhere(ctx, prefix, "", 10, nil); err == nil || len(got) != 0 {
			t.Errorf("ListPageWhere(%q) = %v, %v; want an error", prefix, got, err)
		}
	}
	if got, err := b.ListDirs(ctx, "k/dir/"); err == nil || len(got) != 0 {
		t.Errorf("ListDirs(k/dir/) = %v, %v; want an error", got, err)
	}
	// The root's state, not the caller's input: an error, but not ErrInvalidInput.
	if err := b.Put(ctx, "k/dir/new", []byte("w")); err == nil || errors.Is(err, ErrInvalidInput) {
		t.Errorf("Put(k/dir/new) = %v, want an error other than ErrInvalidInput", err)
	}
	for _, key := range []string{"k/dir/sub/new", "k/dir/secret"} {
		err := b.PutIfAbsent(ctx, key, []byte("w"))
		if err == nil || errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrAlreadyExists) {
			t.Errorf("PutIfAbsent(%q) = %v, want an error other than invalid input or lost race", key, err)
		}
	}
	require.Error(t, b.Delete(ctx, "k/dir/secret"), "Delete(k/dir/secret)")
	if got, err := os.ReadFile(secret); err != nil || string(got) != "outside the root" {
		t.Errorf("the file outside the root after the writes: %q, %v", got, err)
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 || ents[0].Name() != "secret" {
		t.Errorf("outside the root after the writes: %v, %v; want only secret", ents, err)
	}
	require.Equal(t, []string{"k/object"}, listKeys(t, b, ""))
	require.Equal(t, "x", mustGet(t, b, "k/object"), "Get(k/object) under a symlinked root")
}

// TestFileBucketCreateOnlyOverANonObjectSaysSo: a create-only write whose name a directory, a
// FIFO or a symlink takes fails naming it, not as a race lost to another writer, which every
// retry would lose again.
func TestFileBucketCreateOnlyOverANonObjectSaysSo(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b := mustOpen(t, fileURL(root)+"?nosync=1")
	mustPut(t, b, "k/object", "x")
	require.NoError(t, os.Mkdir(filepath.Join(root, "k", "dir"), 0o755))
	if err := syscall.Mkfifo(filepath.Join(root, "k", "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	require.NoError(t, os.Symlink("object", filepath.Join(root, "k", "link")))
	for key, kind := range map[string]string{"k/dir": "directory", "k/fifo": "FIFO", "k/link": "symlink"} {
		err := b.PutIfAbsent(ctx, key, []byte("w"))
		if err == nil || errors.Is(err, ErrAlreadyExists) || !strings.Contains(err.Error(), "is a "+kind+", not an object") {
			t.Errorf("PutIfAbsent(%q) = %v, want it named a %s, not a lost race", key, err, kind)
		}
	}
	require.ErrorIs(t, b.PutIfAbsent(ctx, "k/object", []byte("w")), ErrAlreadyExists)
}

// rootsInTheWay makes in a temporary directory dir roots that cannot be a directory: a file
// "file", a FIFO "fifo", symlinks "to-file" and "to-fifo" to them, and "dangling", a symlink
// to "nowhere", which does not exist.
func rootsInTheWay(t *testing.T) (dir, file, fifo string) {
	t.Helper()
	dir = t.TempDir()
	file, fifo = filepath.Join(dir, "file"), filepath.Join(dir, "fifo")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for link, target := range map[string]string{"to-file": file, "to-fifo": fifo, "dangling": filepath.Join(dir, "nowhere")} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	return dir, file, fifo
}

// TestOpenExistingBucketCreatesNoRoot: OpenExistingBucket refuses a file:// root that does not
// exist, or that is a file, a FIFO (at once, never waiting on it) or a symlink to one, as
// invalid input and creates nothing; an existing root opens as OpenBucket opens it.
func TestOpenExistingBucketCreatesNoRoot(t *testing.T) {
	ctx := context.Background()
	dir, file, fifo := rootsInTheWay(t)
	missing := filepath.Join(dir, "not", "yet")
	for root, want := range map[string]string{
		missing:                        "does not exist",
		file:                           "is not a directory",
		filepath.Join(file, "under"):   "is not a directory",
		fifo:                           "is not a directory",
		filepath.Join(dir, "to-fifo"):  "is not a directory",
		filepath.Join(dir, "dangling"): "does not exist",
	} {
		u := "file://" + root + "?nosync=1"
		err := finishOrUnblock(t, root, []string{fifo}, func() error {
			_, err := OpenExistingBucket(ctx, u)
			return err
		})
		require.ErrorIs(t, err, ErrInvalidInput, u)
		require.ErrorContains(t, err, fmt.Sprintf("root %q %s", root, want), u)
	}
	if _, err := os.Stat(filepath.Join(dir, "not")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenExistingBucket created the root's parent: %v", err)
	}

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	b, err := OpenExistingBucket(ctx, "file://"+empty+"?nosync=1")
	require.NoError(t, err, "an existing root")
	defer b.Close()
	mustPut(t, b, "k", "v")
	require.Equal(t, "v", mustGet(t, b, "k"))
}

// TestFileRootThatCannotBeADirectoryIsInvalid: CheckURL and OpenBucket refuse a file:// root
// that is a file, a FIFO (at once), a symlink to one, a dangling symlink, or lies under any of
// them, as invalid input naming what is in the way, and create nothing; a root that does not
// exist passes CheckURL, which leaves it for OpenBucket to create.
func TestFileRootThatCannotBeADirectoryIsInvalid(t *testing.T) {
	ctx := context.Background()
	dir, file, fifo := rootsInTheWay(t)
	toFile, dangling := filepath.Join(dir, "to-file"), filepath.Join(dir, "dangling")
	for root, want := range map[string]string{
		file:                                   fmt.Sprintf("root %q is not a directory", file),
		fifo:                                   fmt.Sprintf("root %q is not a directory", fifo),
		toFile:                                 fmt.Sprintf("root %q is not a directory", toFile),
		dangling:                               fmt.Sprintf("root %q is not a directory", dangling),
		filepath.Join(file, "under"):           fmt.Sprintf("root %q: %q is not a directory", filepath.Join(file, "under"), file),
		filepath.Join(toFile, "a", "b"):        fmt.Sprintf("root %q: %q is not a directory", filepath.Join(toFile, "a", "b"), toFile),
		filepath.Join(dangling, "under"):       fmt.Sprintf("root %q: %q is not a directory", filepath.Join(dangling, "under"), dangling),
		filepath.Join(fifo, "under", "deeper"): fmt.Sprintf("root %q: %q is not a directory", filepath.Join(fifo, "under", "deeper"), fifo),
	} {
		u := "file://" + root + "?nosync=1"
		for name, open := range map[string]func() error{
			"CheckURL":   func() error { return CheckURL(ctx, u) },
			"OpenBucket": func() error { b, err := OpenBucket(ctx, u); closeIf(b); return err },
		} {
			err := finishOrUnblock(t, root, []string{fifo}, open)
			require.ErrorIs(t, err, ErrInvalidInput, "%s(%q)", name, u)
			require.ErrorContains(t, err, want, "%s(%q)", name, u)
		}
	}
	_, err := os.Lstat(filepath.Join(dir, "nowhere"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a dangling symlink's target was created")
	require.NoError(t, CheckURL(ctx, "file://"+filepath.Join(dir, "not", "yet")), "CheckURL of a root OpenBucket creates")
}

func closeIf(b *Bucket) {
	if b != nil {
		_ = b.Close()
	}
}

// TestFileRootThatCannotBeCreatedIsInvalid: a root the file system will not make (no
// permission, a read-only file system, ENOENT as /proc answers a mkdir) is invalid input
// naming where the mkdir failed; an I/O error stays a failure. Root may write anywhere, so
// the errors are made by hand, and /proc is tried for real.
func TestFileRootThatCannotBeCreatedIsInvalid(t *testing.T) {
	const u = "file:///r/x"
	for errno, want := range map[syscall.Errno]string{
		syscall.EACCES: `root "/r/x": "/r" cannot be created (permission denied)`,
		syscall.EROFS:  `root "/r/x": "/r" cannot be created (read-only file system)`,
		syscall.ENOENT: `root "/r/x": "/r" cannot be created (no such file or directory)`,
	} {
		err := rootMkdirError(u, "/r/x", &fs.PathError{Op: "mkdir", Path: "/r", Err: errno})
		require.ErrorIs(t, err, ErrInvalidInput, errno)
		require.ErrorContains(t, err, want, errno)
	}
	err := rootMkdirError(u, "/r/x", &fs.PathError{Op: "mkdir", Path: "/r/x", Err: syscall.EPERM})
	require.ErrorIs(t, err, ErrInvalidInput, "EPERM on the root")
	require.ErrorContains(t, err, `root "/r/x" cannot be created (operation not permitted)`)
	err = rootMkdirError(u, "/r/x", &fs.PathError{Op: "mkdir", Path: "/r", Err: syscall.EIO})
	require.Error(t, err, "EIO")
	require.NotErrorIs(t, err, ErrInvalidInput, "EIO")

	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here")
	}
	b, err := OpenBucket(context.Background(), "file:///proc/walkeeper-nonexistent/x")
	closeIf(b)
	require.ErrorIs(t, err, ErrInvalidInput, "OpenBucket under /proc")
	require.ErrorContains(t, err, `root "/proc/walkeeper-nonexistent/x": "/proc/walkeeper-nonexistent" cannot be created (no such file or directory)`)
}
