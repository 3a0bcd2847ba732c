//go:build unix

package objstore

import (
	"os"
	"syscall"
)

// openObjectFlags open an object's file without waiting for the writer of a FIFO left where
// it should be; get's fstat then refuses anything but a regular file.
const openObjectFlags = syscall.O_NONBLOCK

// openDirFlags open only a directory (ENOTDIR for anything else), so a FIFO where a listing
// expects a directory is absent rather than an open that waits for ever.
const openDirFlags = syscall.O_DIRECTORY | syscall.O_NONBLOCK

// listable is d, a directory opened in the root, as a file whose ReadDir takes each entry's
// type from getdents: Go's os lstats every entry of a directory opened in a Root, one system
// call per name, which made a listing cost O(entries) calls more. The descriptor is the
// same directory, so nothing outside the root is read.
func listable(d *os.File) (*os.File, error) {
	syscall.ForkLock.RLock() // no child inherits the copy before it is close-on-exec
	fd, err := syscall.Dup(int(d.Fd()))
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	name := d.Name()
	_ = d.Close()
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
