package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PutIfAbsent is the base-table commit primitive (docs/DESIGN.md §2): a new manifest version is
// published by creating its object only if absent. These tests prove, rather than assume,
// that exactly one of many racing writers wins each key and that the stored bytes are the
// winner's, across OS processes (file://) and goroutines (file:// and mem://).

const (
	raceRounds = 1000
	raceProcs  = 8
	raceGorout = 8

	helperEnv       = "WALKEEPER_BLOB_RACE_HELPER"
	helperURLEnv    = "WALKEEPER_BLOB_RACE_URL"
	helperIDEnv     = "WALKEEPER_BLOB_RACE_ID"
	helperRoundsEnv = "WALKEEPER_BLOB_RACE_ROUNDS"
)

func raceKey(i int) string { return fmt.Sprintf("race/round-%d", i) }

func racePayload(who string, i int) []byte { return []byte(who + "/" + strconv.Itoa(i)) }

// TestHelperProcess is not a real test: it is the child side of
// TestPutIfAbsentRaceProcesses, run by re-executing the test binary with helperEnv set.
// Protocol: print "READY", wait for stdin to close (the start barrier, so all children start
// together), then race through the rounds printing "WIN <i>" for every key won.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestPutIfAbsentRaceProcesses")
	}
	code := runRaceHelper()
	os.Exit(code)
}

func runRaceHelper() int {
	ctx := context.Background()
	id := os.Getenv(helperIDEnv)
	rounds, err := strconv.Atoi(os.Getenv(helperRoundsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad rounds:", err)
		return 2
	}
	b, err := OpenBucket(ctx, os.Getenv(helperURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer b.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "READY")
	if err := out.Flush(); err != nil {
		return 2
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the parent closes our stdin
	for i := 0; i < rounds; i++ {
		err := b.PutIfAbsent(ctx, raceKey(i), racePayload(id, i))
		switch {
		case err == nil:
			fmt.Fprintf(out, "WIN %d\n", i)
		case errors.Is(err, ErrAlreadyExists):
		default:
			fmt.Fprintf(os.Stderr, "round %d: %v\n", i, err)
			_ = out.Flush()
			return 3
		}
	}
	if err := out.Flush(); err != nil {
		return 2
	}
	return 0
}

// TestPutIfAbsentRaceProcesses runs raceProcs OS processes through raceRounds keys each on
// one file:// bucket. This is the case gocloud's fileblob gets wrong (its IfNotExist is
// stat-then-rename), and the one that matters: several workers on one machine share a dir.
func TestPutIfAbsentRaceProcesses(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		t.Skip("inside helper")
	}
	root := t.TempDir()
	u := fileURL(root)
	children := startRaceChildren(t, raceProcs, "TestHelperProcess", func(id string) []string {
		return []string{helperEnv + "=1", helperURLEnv + "=" + u, helperIDEnv + "=" + id, helperRoundsEnv + "=" + strconv.Itoa(raceRounds)}
	})
	// Every child has opened the bucket and is waiting on stdin; closing it releases all at once.
	for _, c := range children {
		_ = c.stdin.Close()
	}
	winners := make([][]string, raceRounds)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				line, err := c.stdout.ReadString('\n')
				if f := strings.Fields(line); len(f) == 2 && f[0] == "WIN" {
					i, aerr := strconv.Atoi(f[1])
					if aerr != nil || i < 0 || i >= raceRounds {
						t.Errorf("%s: bad line %q", c.id, line)
					} else {
						mu.Lock()
						winners[i] = append(winners[i], c.id)
						mu.Unlock()
					}
				} else if line != "" {
					t.Errorf("%s: unexpected output %q", c.id, line)
				}
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("%s exited: %v; stderr: %s", c.id, err, c.stderr.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	b := mustOpen(t, u)
	checkRaceResult(t, b, winners)
	if left := tempFilesUnder(t, root); len(left) != 0 {
		t.Fatalf("temp files left: %d, e.g. %s", len(left), left[0])
	}
}

// TestPutIfAbsentRaceGoroutines: the same assertion with goroutines in one process. A
// barrier per round makes every goroutine hit each key at the same moment.
func TestPutIfAbsentRaceGoroutines(t *testing.T) {
	backends := map[string]func(t *testing.T) *Bucket{
		"file": func(t *testing.T) *Bucket { return mustOpen(t, fileURL(fastTempDir(t))) },
		"mem":  func(t *testing.T) *Bucket { return mustOpen(t, newMemURL()) },
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			ctx := context.Background()
			winners := make([][]string, raceRounds)
			var mu sync.Mutex
			bar := newBarrier(raceGorout)
			var wg sync.WaitGroup
			for g := 0; g < raceGorout; g++ {
				id := fmt.Sprintf("goroutine-%d", g)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < raceRounds; i++ {
						bar.wait()
						err := b.PutIfAbsent(ctx, raceKey(i), racePayload(id, i))
						switch {
						case err == nil:
							mu.Lock()
							winners[i] = append(winners[i], id)
							mu.Unlock()
						case errors.Is(err, ErrAlreadyExists):
						default:
							t.Errorf("%s round %d: %v", id, i, err)
						}
					}
				}()
			}
			wg.Wait()
			checkRaceResult(t, b, winners)
		})
	}
}

// fastTempDir returns a fresh directory on tmpfs (/dev/shm) when there is one, else
// t.TempDir(). Creating a file on this machine's disk costs ~2 ms, so 8 goroutines x 1000
// rounds with a barrier per round would take most of the time budget creating temp files;
// link(2) exclusivity, which is what the test proves, is the same on every local filesystem.
// The cross-process test stays on the real disk.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "walkeeper-blobtest-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// checkRaceResult asserts exactly one winner per key and that the stored bytes are its payload.
func checkRaceResult(t *testing.T, b *Bucket, winners [][]string) {
	t.Helper()
	ctx := context.Background()
	bad := 0
	for i, w := range winners {
		if len(w) != 1 {
			if bad++; bad <= 10 {
				t.Errorf("key %s: %d winners %v, want exactly 1", raceKey(i), len(w), w)
			}
			continue
		}
		got, err := b.Get(ctx, raceKey(i))
		if err != nil || !bytes.Equal(got, racePayload(w[0], i)) {
			if bad++; bad <= 10 {
				t.Errorf("key %s: stored %q, %v; want winner %s's payload", raceKey(i), got, err, w[0])
			}
		}
	}
	if objs, err := b.List(ctx, "race/"); err != nil || len(objs) != len(winners) {
		t.Errorf("List(race/) = %d objects, %v; want %d", len(objs), err, len(winners))
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys wrong", bad, len(winners))
	}
}

// barrier is a reusable (cyclic) barrier for n goroutines.
type barrier struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	count int
	gen   int
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *barrier) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen
	if b.count++; b.count == b.n {
		b.count = 0
		b.gen++
		b.cond.Broadcast()
		return
	}
	for gen == b.gen {
		b.cond.Wait()
	}
}

// TestPutIfAbsentConcurrentWithDelete: writers racing into a directory while a deleter
// empties it (and so prunes the directory) must never fail spuriously.
func TestPutIfAbsentConcurrentWithDelete(t *testing.T) {
	ctx := context.Background()
	b := mustOpen(t, fileURL(t.TempDir()))
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("d/e/k-%d-%d", g, i)
				if err := b.PutIfAbsent(ctx, key, []byte("x")); err != nil {
					t.Errorf("PutIfAbsent: %v", err)
					return
				}
				if err := b.Put(ctx, key+"p", []byte("y")); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if err := b.Delete(ctx, key); err != nil {
					t.Errorf("Delete: %v", err)
					return
				}
				if err := b.Delete(ctx, key+"p"); err != nil {
					t.Errorf("Delete: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := listKeys(t, b, ""); len(got) != 0 {
		t.Fatalf("left over: %q", got)
	}
}
