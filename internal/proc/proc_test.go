package proc

import (
	"bytes"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// FreePorts returns distinct ports below the kernel's ephemeral range.
func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < 10000 || p >= ephemeralStart {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
	}
}

// A process's output goes to Output when no log file is named, and Stop ends a process
// without an error when the polite signal was enough.
func TestOutputAndStop(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	var out bytes.Buffer
	p, err := Start(Spec{Path: sh, Args: []string{"-c", "echo ready"}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if p.Err() != nil || out.String() != "ready\n" {
		t.Fatalf("Err() = %v, output %q", p.Err(), out.String())
	}

	p, err = Start(Spec{Path: sh, Args: []string{"-c", "exec sleep 60"}, ParentDeath: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := errors.AsType[*exec.ExitError](p.Err()); !ok {
		t.Fatalf("Err() = %v, want the signal's exit error", p.Err())
	}
}
