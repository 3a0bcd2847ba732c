package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/s3test"
)

// The s3:// backend tested for real: an in-process S3-compatible server (gofakes3 behind
// internal/s3test's atomic conditional-write wrapper) reached over HTTP through gocloud's
// s3blob and the AWS SDK, the same stack a worker uses against AWS S3. docs/S3.md says what a
// server must support; these tests are the proof for the one we ship.
//
// t.Setenv (AWS credentials) forbids t.Parallel in these tests.

const (
	s3RaceRounds = 200
	s3RaceProcs  = 8
	s3RaceGorout = 8

	// s3ExternalEnv points the S3 tests at an endpoint of your own instead of the in-process
	// server, e.g. WALKEEPER_S3_TEST_URL='s3://my-bucket?region=eu-west-1' (no prefix=
	// parameter: every test adds its own random one and leaves its objects behind). The
	// AWS credentials come from the environment as usual. See docs/S3.md.
	s3ExternalEnv = "WALKEEPER_S3_TEST_URL"

	s3HelperEnv    = "WALKEEPER_S3_RACE_HELPER"
	s3HelperURLEnv = "WALKEEPER_S3_RACE_URL"
	s3HelperIDEnv  = "WALKEEPER_S3_RACE_ID"
)

// s3URL is a fresh, empty S3 storage root for one test: a bucket on an in-process server, or
// a random prefix of the endpoint named by WALKEEPER_S3_TEST_URL.
func s3URL(t *testing.T) string {
	t.Helper()
	if ext := os.Getenv(s3ExternalEnv); ext != "" {
		return s3WithPrefix(ext, s3test.NewBucketName()+"/")
	}
	return s3test.Start(t)
}

// s3WithPrefix adds p to the URL's prefix= parameter (gocloud's key prefix).
func s3WithPrefix(u, p string) string {
	if i := strings.Index(u, "prefix="); i >= 0 {
		return u[:i+len("prefix=")] + s3PrefixOf(u) + p + u[i+len("prefix=")+len(s3PrefixOf(u)):]
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "prefix=" + p
}

func s3PrefixOf(u string) string {
	i := strings.Index(u, "prefix=")
	if i < 0 {
		return ""
	}
	rest := u[i+len("prefix="):]
	if j := strings.IndexByte(rest, '&'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// s3Backends starts one server per gofakes3 backend walkeeper relies on: s3mem (the tests'
// default) and s3bolt (what docker-compose's walkeeper-s3 keeps its objects in); with
// WALKEEPER_S3_TEST_URL set, only that endpoint.
func s3Backends(t *testing.T) map[string]string {
	t.Helper()
	if os.Getenv(s3ExternalEnv) != "" {
		return map[string]string{"external": s3URL(t)}
	}
	s3test.SetCredentials(t)
	out := map[string]string{}
	for _, name := range []string{"s3mem", "s3bolt"} {
		opts := s3test.Options{}
		if name == "s3bolt" {
			opts.BoltPath = filepath.Join(t.TempDir(), "s3.db")
			opts.BoltNoSync = true
		}
		srv, err := s3test.New(opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		bucket := s3test.NewBucketName()
		require.NoError(t, srv.CreateBucket(bucket))
		out[name] = srv.BucketURL(bucket)
	}
	return out
}

func s3Keys(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	objs, err := b.List(context.Background(), prefix)
	require.NoError(t, err)
	keys := []string{}
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestS3BucketConformance: the Bucket contract (blob.go) on s3://, the cases that differ
// between an object store and a filesystem, plus what only S3 exercises (listing pages,
// multipart uploads carrying the precondition).
func TestS3BucketConformance(t *testing.T) {
	ctx := context.Background()
	for name, url := range s3Backends(t) {
		t.Run(name, func(t *testing.T) {
			b, err := OpenBucket(ctx, url)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			require.Equal(t, url, b.URL())

			// Absent keys; a "directory" is not an object.
			_, err = b.Get(ctx, "a/b")
			require.ErrorIs(t, err, ErrNotFound)
			require.NoError(t, b.Put(ctx, "a/b/c", []byte("x")))
			_, err = b.Get(ctx, "a/b")
			require.ErrorIs(t, err, ErrNotFound)
			ok, err := b.Exists(ctx, "a/b")
			require.NoError(t, err)
			require.False(t, ok)

			// Round trip, binary and empty payloads, awkward key characters.
			payload := []byte{0, 1, 2, 255, '\n', 'x'}
			require.NoError(t, b.Put(ctx, "dir/obj.bin", payload))
			got, err := b.Get(ctx, "dir/obj.bin")
			require.NoError(t, err)
			require.Equal(t, payload, got)
			require.NoError(t, b.Put(ctx, "empty", nil))
			got, err = b.Get(ctx, "empty")
			require.NoError(t, err)
			require.Empty(t, got)
			for _, k := range []string{"sp ace/ü.json", "x/__0x41__", "a:b@c=d+e", "q/?#%&=.json"} {
				require.NoError(t, b.Put(ctx, k, []byte(k)))
				got, err := b.Get(ctx, k)
				require.NoError(t, err, k)
				require.Equal(t, k, string(got))
			}

			// Overwrite replaces; List reports the new size.
			require.NoError(t, b.Put(ctx, "o/k", []byte("first version, longer")))
			require.NoError(t, b.Put(ctx, "o/k", []byte("second")))
			objs, err := b.List(ctx, "o/")
			require.NoError(t, err)
			require.Len(t, objs, 1)
			require.EqualValues(t, len("second"), objs[0].Size)
			require.False(t, objs[0].ModTime.IsZero())

			// PutIfAbsent: the second caller loses and the winner's bytes stay.
			require.NoError(t, b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("winner")))
			err = b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("loser"))
			require.ErrorIs(t, err, ErrAlreadyExists)
			got, _ = b.Get(ctx, "v/00000000000000000001.json")
			require.Equal(t, "winner", string(got))
			require.ErrorIs(t, b.PutIfAbsent(ctx, "o/k", []byte("q")), ErrAlreadyExists, "over a plain Put")

			// Delete is idempotent and a deleted key can be created again.
			require.NoError(t, b.Delete(ctx, "never/was"))
			require.NoError(t, b.Delete(ctx, "v/00000000000000000001.json"))
			require.NoError(t, b.Delete(ctx, "v/00000000000000000001.json"))
			require.NoError(t, b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("again")))
			require.NoError(t, b.Delete(ctx, "a/b"), "deleting a directory name is a no-op")
			got, _ = b.Get(ctx, "a/b/c")
			require.Equal(t, "x", string(got))

			// Recursive, sorted, plain-string-prefix listing; delimiter listing for ListDirs.
			for _, k := range []string{"l/b/2", "l/c", "l/a/c", "l/a/b/d", "l/a-b", "l/a.x", "l/a/b/c", "l/b/1/x/y/z"} {
				require.NoError(t, b.Put(ctx, k, []byte("v")))
			}
			require.Equal(t, []string{"l/a-b", "l/a.x", "l/a/b/c", "l/a/b/d", "l/a/c", "l/b/1/x/y/z", "l/b/2", "l/c"}, s3Keys(t, b, "l/"))
			require.Equal(t, []string{"l/a-b", "l/a.x", "l/a/b/c", "l/a/b/d", "l/a/c"}, s3Keys(t, b, "l/a"))
			require.Equal(t, []string{"l/a/b/c", "l/a/b/d"}, s3Keys(t, b, "l/a/b/"))
			require.Equal(t, []string{}, s3Keys(t, b, "l/zzz/"))
			dirs, err := b.ListDirs(ctx, "l")
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b"}, dirs)
			dirs, err = b.ListDirs(ctx, "l/a/")
			require.NoError(t, err)
			require.Equal(t, []string{"b"}, dirs)
			require.NoError(t, b.Delete(ctx, "l/a/b/c"))
			require.NoError(t, b.Delete(ctx, "l/a/b/d"))
			dirs, err = b.ListDirs(ctx, "l/a/")
			require.NoError(t, err)
			require.Empty(t, dirs, "a prefix whose last object is gone is no directory")

			// More keys than one ListObjectsV2 page (1000): gocloud must follow the
			// continuation token, and the delimiter listing must page too.
			const many = 1100
			for i := 0; i < many; i++ {
				require.NoError(t, b.Put(ctx, fmt.Sprintf("p/%04d/x", i), nil))
			}
			require.Len(t, s3Keys(t, b, "p/"), many)
			dirs, err = b.ListDirs(ctx, "p/")
			require.NoError(t, err)
			require.Len(t, dirs, many)
			require.Equal(t, "0000", dirs[0])
			require.Equal(t, fmt.Sprintf("%04d", many-1), dirs[many-1])

			// Invalid keys never reach the server.
			for _, k := range []string{"", "/a", "a//b", "../a", ".tmp-x"} {
				require.ErrorIs(t, b.Put(ctx, k, nil), ErrInvalidInput, "%q", k)
			}
		})
	}
}

// TestS3LargeObjectsAndMultipartPreconditions: objects of 16 MiB and more (the AWS SDK
// transfer manager's multipart threshold) go up as multipart uploads, and the precondition then rides on
// CompleteMultipartUpload. A large WAL object or staged run published with PutIfAbsent must
// still lose cleanly to an existing key.
//
// The precondition is enforced by the wrapper in front of every gofakes3 backend, so one
// backend suffices here (17 MiB uploads are slow under the race detector).
func TestS3LargeObjectsAndMultipartPreconditions(t *testing.T) {
	ctx := context.Background()
	for name, url := range s3Backends(t) {
		if name == "s3bolt" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b, err := OpenBucket(ctx, url)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			big := bytes.Repeat([]byte("0123456789abcdef"), (17<<20)/16+7) // > 17 MiB: 3 parts, not aligned
			other := bytes.Repeat([]byte{'z'}, len(big)+100)

			require.NoError(t, b.PutIfAbsent(ctx, "big/wal", big))
			require.ErrorIs(t, b.PutIfAbsent(ctx, "big/wal", other), ErrAlreadyExists)
			got, err := b.Get(ctx, "big/wal")
			require.NoError(t, err)
			require.True(t, bytes.Equal(big, got), "winner's bytes intact")

			// A small object first, then a large conditional write: still refused.
			require.NoError(t, b.Put(ctx, "big/small-first", []byte("s")))
			require.ErrorIs(t, b.PutIfAbsent(ctx, "big/small-first", big), ErrAlreadyExists)

			// Large plain Put replaces whole.
			require.NoError(t, b.Put(ctx, "big/wal", other))
			got, err = b.Get(ctx, "big/wal")
			require.NoError(t, err)
			require.True(t, bytes.Equal(other, got))
			objs, err := b.List(ctx, "big/")
			require.NoError(t, err)
			require.Len(t, objs, 2)
		})
	}
}

// TestS3PrefixIsolatesRoots: gocloud's ?prefix= parameter gives each storage root its own
// key space in one bucket (the path part of an s3:// URL is ignored by gocloud).
func TestS3PrefixIsolatesRoots(t *testing.T) {
	ctx := context.Background()
	url := s3URL(t)
	a := openTestDB(t, s3WithPrefix(url, "tenant-a/"), "w1")
	bdb := openTestDB(t, s3WithPrefix(url, "tenant-b/"), "w1")
	createGeneric(t, a, "same", false)
	createGeneric(t, bdb, "same", false) // no ErrAlreadyExists: another root

	raw, err := OpenBucket(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	keys := s3Keys(t, raw, "")
	require.Contains(t, keys, "tenant-a/_registry/generic/same.json")
	require.Contains(t, keys, "tenant-b/_registry/generic/same.json")
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "tenant-a/") || strings.HasPrefix(k, "tenant-b/"), k)
	}
}

// TestS3PutIfAbsentRaceGoroutines: s3RaceGorout goroutines race every key at the same
// moment (a barrier per round); exactly one wins each and the stored bytes are its own.
func TestS3PutIfAbsentRaceGoroutines(t *testing.T) {
	ctx := context.Background()
	for name, url := range s3Backends(t) {
		t.Run(name, func(t *testing.T) {
			b, err := OpenBucket(ctx, url)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			winners := make([][]string, s3RaceRounds)
			var mu sync.Mutex
			bar := newBarrier(s3RaceGorout)
			var wg sync.WaitGroup
			for g := 0; g < s3RaceGorout; g++ {
				id := fmt.Sprintf("goroutine-%d", g)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < s3RaceRounds; i++ {
						bar.wait() // every goroutine hits key i at the same moment
						err := b.PutIfAbsent(ctx, s3RaceKey(i), s3RacePayload(id, i))
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
			s3CheckRace(t, b, winners)
		})
	}
}

func s3RaceKey(i int) string { return fmt.Sprintf("race/round-%04d", i) }

func s3RacePayload(who string, i int) []byte { return []byte(who + "/" + strconv.Itoa(i)) }

// s3CheckRace asserts exactly one winner per key and that each key holds its winner's bytes.
func s3CheckRace(t *testing.T, b *Bucket, winners [][]string) {
	t.Helper()
	ctx := context.Background()
	bad := 0
	for i, w := range winners {
		if len(w) != 1 {
			if bad++; bad <= 10 {
				t.Errorf("key %s: %d winners %v, want exactly 1", s3RaceKey(i), len(w), w)
			}
			continue
		}
		got, err := b.Get(ctx, s3RaceKey(i))
		if err != nil || !bytes.Equal(got, s3RacePayload(w[0], i)) {
			if bad++; bad <= 10 {
				t.Errorf("key %s: stored %q, %v; want %s's payload", s3RaceKey(i), got, err, w[0])
			}
		}
	}
	objs, err := b.List(ctx, "race/")
	require.NoError(t, err)
	require.Len(t, objs, len(winners))
	if bad > 0 {
		t.Fatalf("%d of %d keys wrong", bad, len(winners))
	}
}

// TestS3RaceHelperProcess is the child side of TestS3PutIfAbsentRaceProcesses, run by
// re-executing the test binary; it skips in a normal run. Protocol (a cross-process barrier
// per round over pipes): print READY; then for every line "<i>" read from stdin, race key i
// and answer "WIN <i>" or "LOSE <i>"; exit when stdin closes.
func TestS3RaceHelperProcess(t *testing.T) {
	if os.Getenv(s3HelperEnv) != "1" {
		t.Skip("child process of TestS3PutIfAbsentRaceProcesses")
	}
	os.Exit(s3RaceChild())
}

func s3RaceChild() int {
	ctx := context.Background()
	id := os.Getenv(s3HelperIDEnv)
	b, err := OpenBucket(ctx, os.Getenv(s3HelperURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer b.Close()
	// Warm the connection pool and prove the credentials work before the first round.
	if _, err := b.Exists(ctx, "race/warm-up"); err != nil {
		fmt.Fprintln(os.Stderr, "warm-up:", err)
		return 2
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		i, err := strconv.Atoi(strings.TrimSpace(in.Text()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad round:", in.Text())
			return 2
		}
		err = b.PutIfAbsent(ctx, s3RaceKey(i), s3RacePayload(id, i))
		switch {
		case err == nil:
			fmt.Printf("WIN %d\n", i)
		case errors.Is(err, ErrAlreadyExists):
			fmt.Printf("LOSE %d\n", i)
		default:
			fmt.Fprintf(os.Stderr, "round %d: %v\n", i, err)
			return 3
		}
	}
	return 0
}

// TestS3PutIfAbsentRaceProcesses: s3RaceProcs OS processes (the test binary re-executed), each
// with its own HTTP client, connection pool and SDK state as separate workers have, race
// s3RaceRounds keys on one server. The parent releases every round to all children at once
// and waits for all answers before the next, so every key is contended by every process.
func TestS3PutIfAbsentRaceProcesses(t *testing.T) {
	if os.Getenv(s3HelperEnv) == "1" {
		t.Skip("inside the child")
	}
	url := s3URL(t) // credentials reach the children through os.Environ()
	children := startRaceChildren(t, s3RaceProcs, "TestS3RaceHelperProcess", func(id string) []string {
		return []string{s3HelperEnv + "=1", s3HelperURLEnv + "=" + url, s3HelperIDEnv + "=" + id}
	})
	winners := make([][]string, s3RaceRounds)
	answers := make([]string, len(children))
	for i := 0; i < s3RaceRounds; i++ {
		for _, c := range children {
			if _, err := fmt.Fprintf(c.stdin, "%d\n", i); err != nil {
				t.Fatalf("%s: %v; stderr: %s", c.id, err, c.stderr.String())
			}
		}
		var wg sync.WaitGroup
		for p, c := range children {
			wg.Add(1)
			go func() {
				defer wg.Done()
				line, err := c.stdout.ReadString('\n')
				if err != nil {
					line = "ERR " + err.Error()
				}
				answers[p] = strings.TrimSpace(line)
			}()
		}
		wg.Wait()
		for p, a := range answers {
			switch a {
			case fmt.Sprintf("WIN %d", i):
				winners[i] = append(winners[i], children[p].id)
			case fmt.Sprintf("LOSE %d", i):
			default:
				t.Fatalf("%s round %d: answered %q; stderr: %s", children[p].id, i, a, children[p].stderr.String())
			}
		}
	}
	for _, c := range children {
		_ = c.stdin.Close()
	}
	for _, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("%s: %v; stderr: %s", c.id, err, c.stderr.String())
		}
	}
	b, err := OpenBucket(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	s3CheckRace(t, b, winners)
	perProc := map[string]int{}
	for _, w := range winners {
		perProc[w[0]]++
	}
	t.Logf("keys won per process: %v", perProc)
	require.Greater(t, len(perProc), 1, "the race was never contended")
	for who, n := range perProc {
		// Processes that take turns hand nearly every key to whoever goes first.
		require.LessOrEqual(t, float64(n)/float64(s3RaceRounds), 0.5, "%s won %d of %d keys: the processes took turns", who, n, s3RaceRounds)
	}
}

// TestS3RacingCommittersFromManyShardsAllLand: 8 writers (shards) each prepare a merge, then
// all commit at the same moment to one base table. Every commit must land exactly once: the
// losers of each put-if-absent round reload and rebase, so the base ends at version 8 with
// 8 runs, every watermark set, and every row readable from a fresh process.
func TestS3RacingCommittersFromManyShardsAllLand(t *testing.T) {
	ctx := context.Background()
	url := s3URL(t)
	const shards = 8
	stores := make([]*Store, shards)
	dbs := make([]*DB, shards)
	for i := range stores {
		dbs[i] = openTestDB(t, url, fmt.Sprintf("w%d", i))
		if i == 0 {
			stores[i] = createGeneric(t, dbs[i], "race", false)
		} else {
			stores[i] = openGeneric(t, dbs[i], "race")
		}
		for g := 0; g < 3; g++ {
			appendRows(t, stores[i], row(fmt.Sprintf("s%d-g%d", i, g), int64(i*10+g)))
			flush(t, stores[i])
		}
	}
	prepared := make([]*PreparedMerge, shards)
	for i, s := range stores {
		p, err := s.Prepare(ctx, PrepareParams{AttemptKey: fmt.Sprintf("race-%d", i)})
		require.NoError(t, err)
		require.NotNil(t, p)
		prepared[i] = p
	}
	start := make(chan struct{})
	errs := make([]error, shards)
	results := make([]CommitResult, shards)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.Commit(ctx, prepared[i])
		}()
	}
	close(start)
	wg.Wait()
	versions := map[uint64]bool{}
	for i, err := range errs {
		require.NoError(t, err, "shard %d", i)
		require.False(t, results[i].AlreadyCommitted)
		require.False(t, versions[results[i].BaseVersion], "two commits published version %d", results[i].BaseVersion)
		versions[results[i].BaseVersion] = true
	}
	base, err := stores[0].loadBase(ctx)
	require.NoError(t, err)
	require.EqualValues(t, shards, base.Version, "one base version per merge, none lost")
	require.Len(t, base.Runs, shards)
	for i := range stores {
		require.EqualValues(t, 3, base.Watermarks[dbs[i].Shard()], "shard %d", i)
	}

	want := map[string]int64{}
	for i := 0; i < shards; i++ {
		for g := 0; g < 3; g++ {
			want[fmt.Sprintf("s%d-g%d", i, g)] = int64(i*10 + g)
		}
	}
	reader := openGeneric(t, openTestDB(t, url, "reader"), "race")
	require.Equal(t, want, allRows(t, reader, SourceBase))
	require.Equal(t, want, allRows(t, reader, SourceAll))
	require.Empty(t, allRows(t, reader, SourceWAL))
	for i := range stores {
		require.Equal(t, 0, pendingOf(t, reader, dbs[i].Shard()))
	}
}

// TestS3AppendFlushMergeReadRoundTrip: the whole store life cycle on S3 — create, append from
// two shards, overwrite and delete across shards, seal, read before and after merge from a
// third process, compact, reopen — and the object layout docs/FORMAT.md promises.
func TestS3AppendFlushMergeReadRoundTrip(t *testing.T) {
	ctx := context.Background()
	url := s3URL(t)
	w1 := openTestDB(t, url, "w1")
	w2 := openTestDB(t, url, "w2")
	s1 := createGeneric(t, w1, "rt", false)
	s2 := openGeneric(t, w2, "rt")

	for i := 0; i < 40; i++ {
		appendRows(t, s1, row(fmt.Sprintf("k%02d", i), int64(i)))
		if i%10 == 9 {
			flush(t, s1)
		}
	}
	appendRows(t, s2, row("k05", 500), row("x1", 1)) // newer version of k05 from another shard
	require.NoError(t, s2.Delete(ctx, "k07"))
	flush(t, s2)
	require.NoError(t, s1.Delete(ctx, "k08"))
	appendRows(t, s1, Row{Key: "nulls", Values: []any{"nulls", nil, nil}})
	flush(t, s1)

	want := map[string]int64{"x1": 1, "nulls": -1}
	for i := 0; i < 40; i++ {
		want[fmt.Sprintf("k%02d", i)] = int64(i)
	}
	want["k05"] = 500
	delete(want, "k07")
	delete(want, "k08")

	reader := openGeneric(t, openTestDB(t, url, "reader"), "rt")
	require.Equal(t, want, allRows(t, reader, SourceAll), "before merge")
	require.Empty(t, allRows(t, reader, SourceBase))
	st, err := reader.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Shards, 2)

	// Any handle merges every shard (MergeAll visits all pending shards): 5 + 1 generations.
	n1, err := s1.MergeAll(ctx)
	require.NoError(t, err)
	n2, err := s2.MergeAll(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, n1+n2)
	require.Equal(t, want, allRows(t, reader, SourceAll), "after merge")
	require.Equal(t, want, allRows(t, reader, SourceBase))
	require.Empty(t, allRows(t, reader, SourceWAL))
	got, err := reader.Get(ctx, "k05")
	require.NoError(t, err)
	require.EqualValues(t, 500, toInt64(got["n"]))
	_, err = reader.Get(ctx, "k07")
	require.ErrorIs(t, err, ErrNotFound)

	res, err := s1.CompactBase(ctx, CompactParams{})
	require.NoError(t, err)
	require.True(t, res.Committed, "%+v", res)
	require.Equal(t, want, allRows(t, reader, SourceBase), "after compaction")

	// Layout (docs/FORMAT.md §1) and no leftovers: no generation files, no WAL objects of
	// merged data, every data/ file referenced by the latest manifest.
	raw, err := OpenBucket(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	keys := s3Keys(t, raw, "")
	require.Contains(t, keys, "_registry/generic/rt.json")
	require.Contains(t, keys, "generic/rt/store.json")
	base, err := reader.loadBase(ctx)
	require.NoError(t, err)
	require.Contains(t, keys, fmt.Sprintf("generic/rt/_versions/%020d.json", base.Version))
	for _, shard := range []string{w1.Shard(), w2.Shard()} {
		require.Empty(t, genFilesOnDisk(t, reader, shard), "merged generation files deleted")
	}
	var live []string
	for _, r := range base.Runs {
		live = append(live, r.Path)
	}
	data := s3Keys(t, raw, "generic/rt/data/")
	require.Subset(t, data, live)

	// A fresh process sees the same after closing everything.
	require.NoError(t, w1.Close(ctx))
	require.NoError(t, w2.Close(ctx))
	again := openGeneric(t, openTestDB(t, url, "w1"), "rt")
	require.Equal(t, want, allRows(t, again, SourceAll))
	require.True(t, reflect.DeepEqual(want, allRows(t, again, SourceBase)))
}
