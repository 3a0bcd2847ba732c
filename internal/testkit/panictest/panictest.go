// Package panictest keeps recovering goroutine panics from hiding bugs in tests: a test binary
// fails when its goroutines recovered more panics than its tests injected on purpose.
package panictest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

var injected atomic.Int64

// Injected records that a test is about to make a goroutine panic on purpose.
func Injected() { injected.Add(1) }

// Main runs m and fails the binary when recovered (store.RecoveredPanics) counts a panic no
// test injected. A package's TestMain calls it and nothing else.
func Main(m *testing.M, recovered func() int64) {
	code := m.Run()
	if got, want := recovered(), injected.Load(); code == 0 && got != want {
		fmt.Fprintf(os.Stderr, "FAIL: goroutines recovered %d panics, %d of them injected (see 'goroutine panicked' in the logs)\n", got, want)
		code = 1
	}
	os.Exit(code)
}
