//go:build unix

package objstore

import "syscall"

// openNoWait opens a FIFO left where an object should be without waiting for a writer that
// never comes; get's fstat then refuses it as not an object.
const openNoWait = syscall.O_NONBLOCK

// openDirOnly opens only a directory (ENOTDIR otherwise), so a FIFO where a listing expects a
// directory is absent rather than an open that waits for ever.
const openDirOnly = syscall.O_DIRECTORY | syscall.O_NONBLOCK
