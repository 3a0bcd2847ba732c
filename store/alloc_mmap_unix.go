//go:build unix

package store

import "syscall"

// mapBuffer maps size bytes of anonymous memory outside the Go heap: the garbage collector
// neither scans it nor counts it toward its heap goal, and unmapBuffer returns it to the OS
// at once. Page-aligned, so bufAlignment-aligned. nil if the mapping fails (the caller
// falls back to the Go heap).
func mapBuffer(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// unmapBuffer unmaps a buffer of mapBuffer (any length, its full capacity). It reports
// false for a buffer that mapBuffer did not map, which is then left to the garbage collector.
func unmapBuffer(b []byte) bool {
	return syscall.Munmap(b[:cap(b)]) == nil
}
