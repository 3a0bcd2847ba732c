//go:build unix

package store

import "syscall"

// mapBuffer maps size bytes of anonymous memory outside the Go heap, which the collector
// neither scans nor counts and unmapBuffer returns to the OS at once; nil if it fails.
func mapBuffer(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// unmapBuffer unmaps a buffer of a mapped size class (any length, its full capacity); a
// smaller one is left to the garbage collector, and so is the heap fallback of a failed
// mmap, which syscall.Munmap refuses since it tracks the mappings it made.
func unmapBuffer(b []byte) {
	if isMapped(cap(b)) {
		_ = syscall.Munmap(b[:cap(b)])
	}
}
