//go:build unix

package objstore

import "syscall"

// openObjectFlags open an object's file without waiting for the writer of a FIFO left where
// it should be (get's fstat then refuses it) and without following a symlink, which could
// lead out of the root (ELOOP: absent).
const openObjectFlags = syscall.O_NONBLOCK | syscall.O_NOFOLLOW

// openDirFlags open only a real directory: ENOTDIR for anything else, so a FIFO where a
// listing expects a directory is absent rather than an open that waits for ever, and ELOOP
// for a symlink.
const openDirFlags = syscall.O_DIRECTORY | syscall.O_NONBLOCK | syscall.O_NOFOLLOW
