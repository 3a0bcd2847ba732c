// Package backends runs walkeeper's storage layer against every backend it documents:
// file:// and mem:// in-process, and real servers for s3:// (MinIO, versitygw), gs://
// (fake-gcs-server) and azblob:// (Azurite), started by internal/testkit/testservers. See
// docs/STORAGE.md for the matrix and how to point it at your own endpoint.
package backends

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/testkit/bucketconformance"
	"github.com/walkeeper/walkeeper/internal/testkit/testservers"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// EnvStorageURL points the matrix at a user's own bucket instead of the servers started
// here: every test runs under a fresh random prefix= of it and deletes what it wrote.
const EnvStorageURL = "WALKEEPER_TEST_STORAGE_URL"

// largeObject is past the size where every SDK switches to its multi-request upload: the S3
// transfer manager's 16 MiB multipart threshold (8 MiB parts), Azure's 8 MiB block size
// (staged blocks, then a block-list commit) and the GCS writer's 16 MiB chunk (resumable
// upload). The conditional create must hold on that path too.
const largeObject = 17<<20 + 123

// target is one backend of the matrix.
type target struct {
	name string
	// start brings the backend up for t (a server, once per backend) and returns a function
	// that makes a fresh, empty root on it and returns its storage URL.
	start func(t *testing.T) (newRoot func(t *testing.T) string)
	// inProcess: the backend's objects live in one process (mem://), so the cross-process
	// races run as goroutines on one handle instead.
	inProcess bool
}

func targets() []target {
	if u := os.Getenv(EnvStorageURL); u != "" {
		return []target{{name: "user", start: func(*testing.T) func(*testing.T) string {
			return func(t *testing.T) string { return withPrefix(t, u) }
		}}}
	}
	ts := []target{
		{name: "file", start: func(*testing.T) func(*testing.T) string {
			return func(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) + "?nosync=1" }
		}},
		{name: "mem", inProcess: true, start: func(*testing.T) func(*testing.T) string {
			return func(*testing.T) string { return "mem://" + randomHex(6) }
		}},
	}
	for _, b := range testservers.Backends() {
		ts = append(ts, target{name: string(b.Kind), start: func(t *testing.T) func(*testing.T) string {
			s := b.Start(t)
			t.Logf("%s %s at %s", b.Kind, s.Version, s.Endpoint)
			return func(t *testing.T) string {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				u, err := s.NewBucket(ctx, "wk")
				if err != nil {
					t.Fatalf("%s: create bucket: %v", b.Kind, err)
				}
				return u
			}
		}})
	}
	return ts
}

// The suites of the matrix, in the order they run on each backend. The names are the
// columns of the table scripts/matrix-table.sh prints.
var suites = []struct {
	name string
	run  func(t *testing.T, tg target, newRoot func(*testing.T) string)
}{
	// The whole single-handle Bucket contract (internal/testkit/bucketconformance), each case on a
	// fresh root.
	{"Conformance", func(t *testing.T, _ target, newRoot func(*testing.T) string) {
		bucketconformance.Run(t, func(t *testing.T) *objstore.Bucket { return openBucket(t, newRoot(t)) })
	}},
	// Small objects: every process hits every key at once, 40 keys.
	{"RaceProcesses", func(t *testing.T, tg target, newRoot func(*testing.T) string) {
		race(t, tg, newRoot(t), raceProcs, 40, 0)
	}},
	// ≥ 17 MiB objects on one key per round: S3 multipart (If-None-Match on
	// CompleteMultipartUpload), Azure staged blocks and Put Block List, GCS resumable chunks.
	{"RaceProcessesLarge", func(t *testing.T, tg target, newRoot func(*testing.T) string) {
		race(t, tg, newRoot(t), 3, 4, largeObject)
	}},
	{"StoreRoundTrip", func(t *testing.T, _ target, newRoot func(*testing.T) string) { testStoreRoundTrip(t, newRoot(t)) }},
	{"Smoke", func(t *testing.T, _ target, newRoot func(*testing.T) string) { testRoundTrip(t, newRoot(t)) }},
	{"LargePutIfAbsentRace", func(t *testing.T, _ target, newRoot func(*testing.T) string) { testLargePutIfAbsentRace(t, newRoot(t)) }},
	{"PutFromAbandoned", func(t *testing.T, _ target, newRoot func(*testing.T) string) { testPutFromAbandoned(t, newRoot(t)) }},
}

const raceProcs = 4

// TestMatrix runs every suite on every backend: the backend × suite table of .ci/run.
func TestMatrix(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			newRoot := tg.start(t)
			for _, suite := range suites {
				t.Run(suite.name, func(t *testing.T) {
					defer failOnPanic(t)
					suite.run(t, tg, newRoot)
				})
			}
		})
	}
}

// TestBucketRaceChild is the child side of the cross-process races (RaceProcesses
// re-executes this test binary); it skips in a normal run.
func TestBucketRaceChild(t *testing.T) { bucketconformance.RaceChild(t) }

// race has procs writers race rounds keys on root in lockstep, each object size bytes: OS
// processes with their own handles, or goroutines on one handle for an in-process backend.
func race(t *testing.T, tg target, root string, procs, rounds, size int) {
	if tg.inProcess {
		bucketconformance.RaceGoroutines(t, openBucket(t, root), procs, rounds, size)
		return
	}
	bucketconformance.RaceProcesses(t, root, bucketconformance.RaceOptions{
		Procs: procs, Rounds: rounds, ChildTest: "TestBucketRaceChild", PayloadSize: size,
	})
}

func testRoundTrip(t *testing.T, root string) {
	ctx := testContext(t)
	b := openBucket(t, root)
	keys := []string{"smoke/a/1", "smoke/a/2", "smoke/b/1"}
	for _, k := range keys {
		if err := b.PutIfAbsent(ctx, k, []byte("v1:"+k)); err != nil {
			t.Fatalf("PutIfAbsent(%s) on an empty root: %v", k, err)
		}
	}
	if err := b.PutIfAbsent(ctx, keys[0], []byte("second")); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second PutIfAbsent(%s) = %v, want ErrAlreadyExists", keys[0], err)
	}
	got, err := b.Get(ctx, keys[0])
	if err != nil || string(got) != "v1:"+keys[0] {
		t.Fatalf("Get(%s) = %q, %v; want the first writer's bytes", keys[0], got, err)
	}
	list, err := b.List(ctx, "smoke/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(keys) {
		t.Fatalf("List(smoke/) = %v, want %v", list, keys)
	}
	for i, o := range list {
		if o.Key != keys[i] || o.Size != int64(len("v1:"+keys[i])) {
			t.Fatalf("List(smoke/)[%d] = %+v, want key %s size %d", i, o, keys[i], len("v1:"+keys[i]))
		}
	}
	dirs, err := b.ListDirs(ctx, "smoke")
	if err != nil || fmt.Sprint(dirs) != "[a b]" {
		t.Fatalf("ListDirs(smoke) = %v, %v; want [a b]", dirs, err)
	}
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(%s): %v", k, err)
		}
	}
	if err := b.Delete(ctx, keys[0]); err != nil {
		t.Fatalf("Delete of an absent key = %v, want nil", err)
	}
	if _, err := b.Get(ctx, keys[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if list, err := b.List(ctx, "smoke/"); err != nil || len(list) != 0 {
		t.Fatalf("List after deleting everything = %v, %v; want nothing", list, err)
	}
	if dirs, err := b.ListDirs(ctx, "smoke"); err != nil || len(dirs) != 0 {
		t.Fatalf("ListDirs after deleting everything = %v, %v; want nothing", dirs, err)
	}
	// Re-create after delete: the precondition sees the key as absent again.
	if err := b.PutIfAbsent(ctx, keys[0], []byte("v2")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	if err := b.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
}

// testLargePutIfAbsentRace releases two writers, each with its own bucket handle (own SDK
// client and connections), at once on one key with different ≥ 17 MiB payloads, for several
// keys: exactly one must win each key, the other must see ErrAlreadyExists, and the stored
// object must be the winner's, whole. A third, late upload must lose too.
func testLargePutIfAbsentRace(t *testing.T, root string) {
	ctx := testContext(t)
	const rounds = 3
	writers := [2]*objstore.Bucket{openBucket(t, root), openBucket(t, root)}
	reader := openBucket(t, root)
	wins := [2]int{}
	for round := range rounds {
		key := fmt.Sprintf("race/large-%d", round)
		payloads := [2][]byte{randomBytes(t, largeObject), randomBytes(t, largeObject+1)}
		errs := [2]error{}
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range writers {
			done.Add(1)
			go func() {
				defer done.Done()
				defer func() { // a client-library panic is this writer's error (see failOnPanic)
					if r := recover(); r != nil {
						errs[i] = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
					}
				}()
				start.Wait()
				errs[i] = writers[i].PutIfAbsent(ctx, key, payloads[i])
			}()
		}
		start.Done()
		done.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("%s: both conditional uploads of %d bytes succeeded: the backend does not enforce If-None-Match on this upload path", key, largeObject)
				}
				winner = i
			case errors.Is(err, store.ErrAlreadyExists):
			default:
				t.Fatalf("%s: writer %d: %v (want success or ErrAlreadyExists)", key, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: neither writer won: %v", key, errs)
		}
		wins[winner]++
		got, err := reader.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s: Get: %v", key, err)
		}
		if !bytes.Equal(got, payloads[winner]) {
			t.Fatalf("%s: stored object (%d bytes, sha256 %s) is not the winner's (%d bytes, sha256 %s)",
				key, len(got), digest(got), len(payloads[winner]), digest(payloads[winner]))
		}
		if err := writers[1-winner].PutIfAbsent(ctx, key, randomBytes(t, largeObject)); !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("%s: a late conditional upload over the existing object = %v, want ErrAlreadyExists", key, err)
		}
		if got, err := reader.Get(ctx, key); err != nil || !bytes.Equal(got, payloads[winner]) {
			t.Fatalf("%s: the late upload changed the object (err %v)", key, err)
		}
		if err := reader.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wins per writer over %d rounds: %v", rounds, wins)
}

// testPutFromAbandoned streams a large object whose producer fails half-way (a merge whose
// input turned out corrupt): PutFrom must return the producer's error and publish nothing,
// neither a new object nor a prefix over the previous one.
func testPutFromAbandoned(t *testing.T, root string) {
	ctx := testContext(t)
	b := openBucket(t, root)
	errProducer := errors.New("producer failed")
	const key = "putfrom/abandoned"
	old := []byte("previous version")
	if err := b.Put(ctx, key, old); err != nil {
		t.Fatal(err)
	}
	chunk := randomBytes(t, 1<<20)
	_, err := b.PutFrom(ctx, key, func(w io.Writer) error {
		for range 10 { // 10 MiB: past the first upload part or block
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return errProducer
	})
	if !errors.Is(err, errProducer) {
		t.Fatalf("PutFrom with a failing producer = %v, want the producer's error", err)
	}
	got, err := b.Get(ctx, key)
	if err != nil || !bytes.Equal(got, old) {
		t.Fatalf("after an abandoned PutFrom, Get = %d bytes, %v; want the previous version intact", len(got), err)
	}
	// And a streamed upload that completes replaces the object whole.
	n, err := b.PutFrom(ctx, key, func(w io.Writer) error {
		for range 17 {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || n != 17<<20 {
		t.Fatalf("PutFrom of 17 MiB = %d, %v", n, err)
	}
	got, err = b.Get(ctx, key)
	if err != nil || len(got) != 17<<20 || !bytes.Equal(got[:1<<20], chunk) {
		t.Fatalf("after PutFrom of 17 MiB, Get = %d bytes, %v", len(got), err)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// failOnPanic turns a panic in a backend's client library into this cell's failure, so one
// broken backend does not take the other cells of the matrix down with the test binary.
func failOnPanic(t *testing.T) {
	if r := recover(); r != nil {
		t.Fatalf("panic: %v\n%s", r, debug.Stack())
	}
}

func openBucket(t *testing.T, root string) *objstore.Bucket {
	t.Helper()
	b, err := objstore.OpenBucket(testContext(t), root)
	if err != nil {
		t.Fatalf("OpenBucket(%s): %v", root, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// withPrefix adds a fresh prefix= to a user's storage URL, so runs never see each other.
func withPrefix(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", EnvStorageURL, err)
	}
	q := u.Query()
	q.Set("prefix", q.Get("prefix")+"walkeeper-test-"+randomHex(6)+"/")
	u.RawQuery = q.Encode()
	return u.String()
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytesNoT(n)) }

func randomBytesNoT(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}
