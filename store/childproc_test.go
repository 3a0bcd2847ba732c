package store

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// raceChild is one re-executed test binary taking part in a cross-process race: it opens its
// own bucket, prints READY, and then talks to the parent over stdin/stdout.
type raceChild struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr lockedBuffer // written by exec's copying goroutine while the parent may read it
}

// startRaceChildren starts n children running only the test named helperTest, each with the
// environment env(id) on top of the parent's, and returns once every one has printed READY,
// so the caller can release them all at the same moment.
func startRaceChildren(t *testing.T, n int, helperTest string, env func(id string) []string) []*raceChild {
	t.Helper()
	children := make([]*raceChild, n)
	for p := range children {
		c := &raceChild{id: "proc-" + strconv.Itoa(p)}
		c.cmd = exec.Command(os.Args[0], "-test.run=^"+helperTest+"$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), env(c.id)...)
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.cmd.Process.Kill() }) // no-op once it has exited
		children[p] = c
	}
	for _, c := range children {
		line, err := c.stdout.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "READY" {
			t.Fatalf("%s: not ready: %q, %v; stderr: %s", c.id, line, err, c.stderr.String())
		}
	}
	return children
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
