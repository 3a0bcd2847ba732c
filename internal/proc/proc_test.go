package proc

import (
	"bytes"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The free-port helpers return distinct ports, in range for FreePortsBelow.
func TestFreePorts(t *testing.T) {
	for name, pick := range map[string]func() ([]int, error){
		"any":   func() ([]int, error) { return FreePorts(5) },
		"below": func() ([]int, error) { return FreePortsBelow(5, 20000) },
	} {
		ports, err := pick()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] || p <= 0 || (name == "below" && (p < 10000 || p >= 20000)) {
				t.Fatalf("%s: ports %v", name, ports)
			}
			seen[p] = true
		}
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
	var exit *exec.ExitError
	if !errors.As(p.Err(), &exit) {
		t.Fatalf("Err() = %v, want the signal's exit error", p.Err())
	}
}
