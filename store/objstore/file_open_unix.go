//go:build unix

package objstore

import "syscall"

// openObjectFlags open an object's file without waiting for the writer of a FIFO left where
// it should be; get's fstat then refuses anything but a regular file.
const openObjectFlags = syscall.O_NONBLOCK

// openDirFlags open only a directory (ENOTDIR for anything else), so a FIFO where a listing
// expects a directory is absent rather than an open that waits for ever.
const openDirFlags = syscall.O_DIRECTORY | syscall.O_NONBLOCK
