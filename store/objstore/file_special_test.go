//go:build unix

package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sock)
	if err := syscall.Bind(sock, &syscall.SockaddrUnix{Name: filepath.Join(root, "k", "sock")}); err != nil {
		t.Fatal(err)
	}

	for _, key := range []string{"k/fifo", "k/sock"} {
		err := finishOrUnblock(t, "Get "+key, fifos, func() error {
			_, err := b.Get(ctx, key)
			return err
		})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", key, err)
		}
	}
	for _, prefix := range []string{"k/dir/", "k/dir/x"} {
		var listed []ObjectInfo
		err := finishOrUnblock(t, "ListPageWhere "+prefix, fifos, func() error {
			var err error
			listed, _, err = b.ListPageWhere(ctx, prefix, "", 10, nil)
			return err
		})
		if err != nil || len(listed) != 0 {
			t.Errorf("ListPageWhere(%q) = %v, %v; want nothing", prefix, listed, err)
		}
		err = finishOrUnblock(t, "Walk "+prefix, fifos, func() error {
			return b.Walk(ctx, prefix, func(o ObjectInfo) error { return errors.New("listed " + o.Key) })
		})
		if err != nil {
			t.Errorf("Walk(%q): %v", prefix, err)
		}
	}
	if got, err := b.List(ctx, "k/"); err != nil || len(got) != 1 || got[0].Key != "k/object" {
		t.Errorf("List(k/) = %v, %v; want only k/object", got, err)
	}
}
