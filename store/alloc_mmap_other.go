//go:build !unix

package store

// Without mmap, large buffers come from the Go heap like small ones.
func mapBuffer(int) []byte { return nil }

func unmapBuffer([]byte) {}
