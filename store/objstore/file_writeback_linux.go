package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f at off to the device, and
// returns without waiting (sync_file_range(2) with SYNC_FILE_RANGE_WRITE). It guarantees
// nothing about durability: the fsync before publishing still does that, with only the tail
// left to wait for. Errors are ignored; the fsync reports what matters.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
