package bucketconformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// PutIfAbsent is the base-table commit primitive (docs/FORMAT.md §3): a new manifest version is
// published by creating its object only if absent. The race checks prove, rather than
// assume, that exactly one of many racing writers wins each key and that the stored bytes
// are the winner's.

// RaceKey is the key of round i of a race; every race writes only under "race/".
func RaceKey(i int) string { return fmt.Sprintf("race/round-%04d", i) }

// racePayload is who's bytes for round i: "who/i", repeated up to size bytes when size is
// larger, so every writer's object differs from every other's in every part of it.
func racePayload(who string, i, size int) []byte {
	head := []byte(who + "/" + strconv.Itoa(i) + "|")
	if size <= len(head) {
		return head[:len(head)-1]
	}
	return bytes.Repeat(head, size/len(head)+1)[:size]
}

// largeRace is the payload size from which RaceProcesses requires the race to have been
// contended in time: such an upload takes long enough (several requests on S3 multipart,
// Azure block list, GCS resumable) that writers released together overlap.
const largeRace = 1 << 20

// RaceGoroutines has goroutines goroutines race through rounds keys on the one handle b, all
// of them hitting each key at the same moment (a barrier per round), and checks the
// result. Each payload is size bytes (0 = a few bytes): at 17 MiB and more every SDK takes
// its multi-request upload path (S3 multipart, Azure staged blocks and a block-list commit,
// GCS resumable chunks). b should be empty under "race/".
func RaceGoroutines(t *testing.T, b *objstore.Bucket, goroutines, rounds, size int) {
	t.Helper()
	ctx := context.Background()
	attempts := make([][]attempt, rounds)
	var mu sync.Mutex
	// Round i starts once every goroutine has counted itself out of barriers[i].
	barriers := make([]sync.WaitGroup, rounds)
	for i := range barriers {
		barriers[i].Add(goroutines)
	}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		id := fmt.Sprintf("goroutine-%d", g)
		wg.Go(func() {
			for i := 0; i < rounds; i++ {
				barriers[i].Done()
				barriers[i].Wait()
				err := b.PutIfAbsent(ctx, RaceKey(i), racePayload(id, i, size))
				if err != nil && !errors.Is(err, objstore.ErrAlreadyExists) {
					t.Errorf("%s round %d: %v", id, i, err)
					continue
				}
				mu.Lock()
				attempts[i] = append(attempts[i], attempt{who: id, won: err == nil})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	checkRace(t, b, attempts, goroutines, size)
}

// RaceOptions configures RaceProcesses.
type RaceOptions struct {
	Procs  int // OS processes racing, at least 2
	Rounds int // keys raced
	// ChildTest is the name of the test in the calling test binary whose whole body is
	// RaceChild(t). The children are that binary re-executed with -test.run=^ChildTest$.
	ChildTest string
	// PayloadSize is the size of each writer's object (0 = a few bytes). From 1 MiB on, the
	// race must have been contended in time: in at least one round some
	// loser's upload started before the winner's finished (a race that ran the writers one
	// after the other proves only the sequential precondition). Not every round: a backend
	// as fast as a local disk can finish a 17 MiB upload before a descheduled rival starts.
	PayloadSize int
}

// Environment of a race child; RaceChild does nothing unless raceChildEnv is "1".
const (
	raceChildEnv = "WALKEEPER_BUCKET_RACE_CHILD"
	raceURLEnv   = "WALKEEPER_BUCKET_RACE_URL"
	raceIDEnv    = "WALKEEPER_BUCKET_RACE_ID"
	raceSizeEnv  = "WALKEEPER_BUCKET_RACE_SIZE"
)

// attempt is one writer's PutIfAbsent of one round, with its wall-clock interval in a
// process race (the racers are processes on one machine, so their clocks agree).
type attempt struct {
	who        string
	won        bool
	start, end int64 // Unix nanoseconds
}

// RaceProcesses has opts.Procs OS processes (the test binary re-executed, see RaceChild)
// open their own handle on url and race opts.Rounds keys, then checks exactly one winner per
// key with its own bytes stored. The children inherit the environment, so credentials set
// with t.Setenv reach them. The bucket at url should be empty under "race/".
func RaceProcesses(t *testing.T, url string, opts RaceOptions) {
	t.Helper()
	if os.Getenv(raceChildEnv) == "1" {
		t.Skip("inside a race child")
	}
	if opts.Procs < 2 || opts.Rounds < 1 || opts.ChildTest == "" {
		t.Fatalf("RaceProcesses: bad options %+v", opts)
	}
	children := startChildren(t, opts, url)
	// How far ahead of its release a round's puts are scheduled: enough for every child to
	// read its line and build its payload on a loaded 2-core machine (a large payload is tens
	// of MiB to fill, race detector included).
	startAhead := 10 * time.Millisecond
	if opts.PayloadSize >= largeRace {
		startAhead = 250 * time.Millisecond
	}
	// Rounds are released one at a time to every child, and every answer is awaited before the
	// next, so every key is contended by every process.
	attempts := make([][]attempt, opts.Rounds)
	for i := range attempts {
		// Every child is blocked reading stdin: these writes release them, and each starts
		// its put at the same instant, a little ahead: woken one after another by the
		// writes, a child that finishes a fast upload (file:// writes 17 MiB in milliseconds)
		// before the next is scheduled would make the race a sequence.
		startAt := time.Now().Add(startAhead).UnixNano()
		for _, c := range children {
			if _, err := fmt.Fprintf(c.stdin, "%d %d\n", i, startAt); err != nil {
				t.Fatalf("%s: %v; stderr: %s", c.id, err, c.stderr.String())
			}
		}
		for _, c := range children {
			line, err := c.stdout.ReadString('\n')
			var verdict string
			var a attempt
			var round int
			_, serr := fmt.Sscanf(line, "%s %d %d %d\n", &verdict, &round, &a.start, &a.end)
			if serr != nil || (verdict != "WIN" && verdict != "LOSE") || round != i {
				t.Errorf("%s: unexpected output %q, %v; stderr: %s", c.id, line, err, c.stderr.String())
				continue
			}
			a.who, a.won = c.id, verdict == "WIN"
			attempts[i] = append(attempts[i], a)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for _, c := range children {
		_ = c.stdin.Close()
	}
	for _, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("%s exited: %v; stderr: %s", c.id, err, c.stderr.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	b, err := objstore.OpenBucket(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	checkRace(t, b, attempts, opts.Procs, opts.PayloadSize)
	contended := 0 // every round has one answer per process: a missing one failed above
	for _, as := range attempts {
		if overlapped(as) {
			contended++
		}
	}
	t.Logf("rounds where a loser's attempt overlapped the winner's: %d of %d", contended, opts.Rounds)
	if opts.PayloadSize >= largeRace && contended == 0 {
		t.Fatalf("no round of %d was contended in time (a loser's upload started before the winner's finished): the uploads ran one after the other", opts.Rounds)
	}
}

// overlapped reports whether some losing attempt started before the winning one finished,
// so both were in flight at once. as holds exactly one winner (checkRace checked).
func overlapped(as []attempt) bool {
	win := as[slices.IndexFunc(as, func(a attempt) bool { return a.won })]
	return slices.ContainsFunc(as, func(a attempt) bool { return !a.won && a.start < win.end && win.start < a.end })
}

// MaxWinShare is the largest share of a race's keys one racer may win before checkRace
// calls the race uncontested. Racers that take turns hand nearly every key to whoever goes
// first, while a real race is not always fair either: a process that hears of each round
// first can win two thirds of the keys (4 processes on MinIO). The bound sits between the
// two.
const MaxWinShare = 0.8

// minSharedRounds: below this many keys a fair race can hand more than MaxWinShare to one
// racer by chance, so checkRace checks only the loser count.
const minSharedRounds = 20

// RaceChild is the child side of RaceProcesses. Call it as the whole body of the test named
// in RaceOptions.ChildTest; in a normal run (not a child) it skips. It never returns in a
// child: it exits the process. Protocol over stdin/stdout: print READY once the bucket is
// open and reachable; then for each line "<i> <start Unix ns>" wait for the start instant,
// race key i and print "WIN <i> <start> <end>" or "LOSE <i> <start> <end>" (Unix ns); exit 0
// when stdin closes.
func RaceChild(t *testing.T) {
	if os.Getenv(raceChildEnv) != "1" {
		t.Skip("child process of bucketconformance.RaceProcesses")
	}
	os.Exit(raceChild())
}

func raceChild() int {
	ctx := context.Background()
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return code
	}
	id := os.Getenv(raceIDEnv)
	size, err := strconv.Atoi(os.Getenv(raceSizeEnv))
	if err != nil {
		return fail(2, "%s: %v", raceSizeEnv, err)
	}
	b, err := objstore.OpenBucket(ctx, os.Getenv(raceURLEnv))
	if err != nil {
		return fail(2, "open: %v", err)
	}
	defer b.Close()
	// Warm the connection pool and prove the credentials work before the first round.
	if _, err := b.Exists(ctx, "race/warm-up"); err != nil {
		return fail(2, "warm-up: %v", err)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "READY")
	if err := out.Flush(); err != nil {
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var i int
		var startAt int64
		if _, err := fmt.Sscanf(in.Text(), "%d %d", &i, &startAt); err != nil {
			return fail(2, "bad round %q: %v", in.Text(), err)
		}
		payload := racePayload(id, i, size)
		time.Sleep(time.Until(time.Unix(0, startAt))) // every child starts together
		start := time.Now().UnixNano()
		err := b.PutIfAbsent(ctx, RaceKey(i), payload)
		end := time.Now().UnixNano()
		verdict := "WIN"
		if errors.Is(err, objstore.ErrAlreadyExists) {
			verdict = "LOSE"
		} else if err != nil {
			_ = out.Flush()
			return fail(3, "round %d: %v", i, err)
		}
		fmt.Fprintf(out, "%s %d %d %d\n", verdict, i, start, end)
		if err := out.Flush(); err != nil {
			return 2
		}
	}
	return 0
}

// checkRace asserts that a race of n racers over len(attempts) keys had exactly one winner
// per key (attempts[i] lists the attempts at RaceKey(i)), that each key holds its winner's
// bytes of size bytes and nothing else was stored under "race/", and that the race
// happened, which one winner per key alone cannot tell from racers that took turns: every
// racer tried every key, so exactly n-1 put-if-absent calls lost each key, and with at least
// minSharedRounds keys the wins are spread over more than one racer, none winning more than
// MaxWinShare of them.
func checkRace(t *testing.T, b *objstore.Bucket, attempts [][]attempt, n, size int) {
	t.Helper()
	ctx := context.Background()
	perRacer := map[string]int{}
	losers, bad := 0, 0
	for i, as := range attempts {
		var w []string
		for _, a := range as {
			if a.won {
				w = append(w, a.who)
			} else {
				losers++
			}
		}
		if len(w) != 1 {
			if bad++; bad <= 10 {
				t.Errorf("key %s: %d winners %v, want exactly 1", RaceKey(i), len(w), w)
			}
			continue
		}
		perRacer[w[0]]++
		got, err := b.Get(ctx, RaceKey(i))
		if err != nil || !bytes.Equal(got, racePayload(w[0], i, size)) {
			if bad++; bad <= 10 {
				t.Errorf("key %s: stored %d bytes starting %q, %v; want winner %s's payload", RaceKey(i), len(got), got[:min(len(got), 40)], err, w[0])
			}
		}
	}
	if objs, err := b.List(ctx, "race/"); err != nil || len(objs) != len(attempts) {
		t.Errorf("List(race/) = %d objects, %v; want %d", len(objs), err, len(attempts))
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys wrong", bad, len(attempts))
	}
	if want := len(attempts) * (n - 1); losers != want {
		t.Errorf("%d lost races, want %d (each of %d racers tries every one of %d keys, one wins)", losers, want, n, len(attempts))
	}
	t.Logf("keys won per racer: %v", perRacer)
	if len(attempts) < minSharedRounds {
		return
	}
	if len(perRacer) < 2 {
		t.Errorf("one racer won all %d keys: the racers never competed", len(attempts))
	}
	// Sorted, so a failure reads the same every run.
	for _, w := range slices.Sorted(maps.Keys(perRacer)) {
		if share := float64(perRacer[w]) / float64(len(attempts)); share > MaxWinShare {
			t.Errorf("%s won %d of %d keys (%.0f%% > %.0f%%): the racers took turns", w, perRacer[w], len(attempts), 100*share, 100*MaxWinShare)
		}
	}
}

// child is one re-executed test binary taking part in a cross-process race.
type child struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *proc.TailBuffer // written by exec's copying goroutine while the parent may read it
}

// startChildren starts opts.Procs children running only opts.ChildTest on the bucket at url,
// and returns once every one has printed READY, so the caller can release them all at the
// same moment.
func startChildren(t *testing.T, opts RaceOptions, url string) []*child {
	t.Helper()
	children := make([]*child, opts.Procs)
	for p := range children {
		c := &child{id: "proc-" + strconv.Itoa(p), stderr: proc.NewTailBuffer(64 << 10)}
		c.cmd = exec.Command(os.Args[0], "-test.run=^"+opts.ChildTest+"$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), raceChildEnv+"=1", raceURLEnv+"="+url, raceIDEnv+"="+c.id,
			raceSizeEnv+"="+strconv.Itoa(opts.PayloadSize))
		c.cmd.Stderr = c.stderr
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
