package walkeeperproc

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// fatalTB records a Fatalf and the clean-ups registered, which it runs when asked.
type fatalTB struct {
	testing.TB
	failed   bool
	cleanups []func()
}

func (f *fatalTB) Helper()               {}
func (f *fatalTB) Cleanup(fn func())     { f.cleanups = append(f.cleanups, fn) }
func (f *fatalTB) Fatal(...any)          { f.failed = true; runtime.Goexit() }
func (f *fatalTB) Fatalf(string, ...any) { f.failed = true; runtime.Goexit() }

// A worker that never became healthy failed its test's Start and was left running, with no
// clean-up of the test's yet to stop it, past the end of the test binary; now Start kills it.
func TestFindingAnUnhealthyWorkerIsStoppedWhenItsStartFails(t *testing.T) {
	healthy := healthyWithin
	healthyWithin = 500 * time.Millisecond
	t.Cleanup(func() { healthyWithin = healthy })
	dir := t.TempDir()
	bin := filepath.Join(dir, "never-healthy")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Bin: bin, Instance: "unhealthy", Log: filepath.Join(dir, "w.log")}
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Start(tb)
	}()
	<-done
	defer func() {
		for _, fn := range tb.cleanups {
			fn()
		}
	}()
	if !tb.failed || w.p == nil {
		t.Fatalf("Start of a worker that never answers /healthz did not fail (failed %v)", tb.failed)
	}
	select {
	case <-w.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the worker whose start failed is still running")
	}
}
