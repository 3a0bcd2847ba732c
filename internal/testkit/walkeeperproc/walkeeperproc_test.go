package walkeeperproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

// Test packages built the walkeeper binary at the same time, each compiling everything, and at
// the default GOGC: go commands now run one at a time per module root (a second one waits for
// the first and then finds its packages in the build cache), at the run's build GOGC.
func TestGoRunsOneAtATimeAtTheBuildGOGC(t *testing.T) {
	t.Setenv(EnvBuildGOGC, "400")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A root of its own: the module root's lock is held for minutes by the run's real builds.
	root := t.TempDir()
	if env := goCommand(ctx, root, "env").Env; !slices.Contains(env, "GOGC=400") || env[len(env)-1] != "GOGC=400" {
		t.Fatalf("go's environment does not end with GOGC=400 from %s", EnvBuildGOGC)
	}

	unlock, err := lockBuilds(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// Another process's build holds the lock: this one waits for it, here until its deadline.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if out, err := goIn(short, root, "env", "GOGC"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("go env ran while another build held the lock: %q, %v", out, err)
	}
	unlock()
	if _, err := goIn(ctx, root, "env", "GOGC"); err != nil {
		t.Fatalf("go env after the lock was dropped: %v", err)
	}
}

// Every test package that runs worker processes linked its own walkeeper binary, 5 to 10
// CPU-seconds each in every run; with the run's binary named, Build links to it instead, and
// refuses a name that is not an executable file rather than starting the tests on it.
func TestBuildLinksToTheRunsBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "walkeeper-run")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, bin)
	out, err := Build(filepath.Join(dir, "walkeeper"))
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(out); err != nil || target != bin {
		t.Fatalf("Build made %s (link to %q, %v), want a link to %s", out, target, err, bin)
	}

	t.Setenv(EnvBinary, filepath.Join(dir, "missing"))
	if _, err := Build(filepath.Join(dir, "walkeeper-2")); err == nil {
		t.Fatalf("Build with %s naming a missing file did not fail", EnvBinary)
	}
}
