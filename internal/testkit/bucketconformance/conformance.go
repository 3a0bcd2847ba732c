package bucketconformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Opener returns a fresh, empty bucket for one test case. It registers the bucket's Close
// with t.Cleanup itself; the suite may close the bucket earlier (closing twice is allowed).
type Opener func(t *testing.T) *objstore.Bucket

// Run runs every case of the contract as a subtest of t, each on its own bucket from open.
// The cases do not call t.Parallel, so open may use t.Setenv.
func Run(t *testing.T, open Opener) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, b *objstore.Bucket)
}

var cases = []testCase{
	{"GetMissing", testGetMissing},
	{"PutGetRoundTrip", testPutGetRoundTrip},
	{"Overwrite", testOverwrite},
	{"PutIfAbsentTwice", testPutIfAbsentTwice},
	{"DeleteIdempotent", testDeleteIdempotent},
	{"ListRecursiveSortedPrefix", testListRecursiveSortedPrefix},
	{"ListDirs", testListDirs},
	{"ListPages", testListPages},
	{"ListPageStartAfter", testListPageStartAfter},
	{"RepeatedWritesLeaveOnlyObjects", testRepeatedWrites},
	{"InvalidKeys", testInvalidKeys},
	{"ContextAndClose", testContextAndClose},
	{"PutAtomicReplace", testPutAtomicReplace},
	{"Faults", testFaults},
}

func mustPut(t *testing.T, b *objstore.Bucket, key, data string) {
	t.Helper()
	wantErr(t, fmt.Sprintf("Put(%q)", key), b.Put(context.Background(), key, []byte(data)), nil)
}

func wantGet(t *testing.T, b *objstore.Bucket, key, want string) {
	t.Helper()
	data, err := b.Get(context.Background(), key)
	if err != nil || string(data) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, data, err, want)
	}
}

// ListKeys returns the keys List reports under prefix, never nil.
func ListKeys(t testing.TB, b *objstore.Bucket, prefix string) []string {
	t.Helper()
	objs, err := b.List(context.Background(), prefix)
	wantErr(t, fmt.Sprintf("List(%q)", prefix), err, nil)
	return keysOf(objs)
}

// keysOf is the keys of objs, never nil.
func keysOf(objs []objstore.ObjectInfo) []string {
	keys := []string{}
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// wantErr fails t unless err is target; a nil target wants no error.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

func listDirs(t testing.TB, b *objstore.Bucket, prefix string) []string {
	t.Helper()
	dirs, err := b.ListDirs(context.Background(), prefix)
	wantErr(t, fmt.Sprintf("ListDirs(%q)", prefix), err, nil)
	if dirs == nil {
		dirs = []string{}
	}
	return dirs
}

// wantLists reports every prefix of want whose listing by list is not its value.
func wantLists(t *testing.T, what string, list func(testing.TB, *objstore.Bucket, string) []string, b *objstore.Bucket, want map[string][]string) {
	t.Helper()
	for prefix, w := range want {
		if got := list(t, b, prefix); !reflect.DeepEqual(got, w) {
			t.Errorf("%s(%q) = %q, want %q", what, prefix, got, w)
		}
	}
}

func testGetMissing(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	_, err := b.Get(ctx, "a/b")
	wantErr(t, "Get missing", err, objstore.ErrNotFound)
	mustPut(t, b, "a/b/c", "x")
	// "a/b" is now a directory on file://; it is still not an object.
	_, err = b.Get(ctx, "a/b")
	wantErr(t, "Get of a directory", err, objstore.ErrNotFound)
	_, err = b.Get(ctx, "a/b/c/d")
	wantErr(t, "Get below an object", err, objstore.ErrNotFound)
	for _, k := range []string{"a/b", "nope", "a/b/c/d"} {
		if ok, err := b.Exists(ctx, k); err != nil || ok {
			t.Fatalf("Exists(%q) = %v, %v; want false, nil", k, ok, err)
		}
	}
}

func testPutGetRoundTrip(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	payload := "\x00\x01\x02\xff\nx"
	mustPut(t, b, "dir/obj.bin", payload)
	wantGet(t, b, "dir/obj.bin", payload)
	if ok, err := b.Exists(ctx, "dir/obj.bin"); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	wantErr(t, "Put empty", b.Put(ctx, "empty", nil), nil)
	wantGet(t, b, "empty", "")
	// Keys with spaces, unicode, characters gocloud's fileblob would escape and characters
	// that need escaping in a URL path or query.
	for _, k := range []string{"sp ace/ü.json", "x/__0x41__", "a:b@c=d+e", "x/y.attrs", "q/?#%&=.json"} {
		mustPut(t, b, k, k)
		wantGet(t, b, k, k)
	}
	keys := ListKeys(t, b, "")
	want := []string{"a:b@c=d+e", "dir/obj.bin", "empty", "q/?#%&=.json", "sp ace/ü.json", "x/__0x41__", "x/y.attrs"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
}

func testOverwrite(t *testing.T, b *objstore.Bucket) {
	mustPut(t, b, "k", "first version, longer")
	mustPut(t, b, "k", "second")
	wantGet(t, b, "k", "second")
	objs, err := b.List(context.Background(), "")
	if err != nil || len(objs) != 1 || objs[0].Key != "k" || objs[0].Size != int64(len("second")) {
		t.Fatalf("List after overwrite = %+v, %v", objs, err)
	}
	// Collectors judge an unreferenced object abandoned by its age (store's compaction outputs
	// after a day, demand records after minutes): a listing must date an object near when it
	// was written, or a young object would look abandoned.
	if age := time.Since(objs[0].ModTime); objs[0].ModTime.IsZero() || age > time.Minute || age < -time.Minute {
		t.Fatalf("ModTime %v is not within a minute of the write (age %v)", objs[0].ModTime, age)
	}
}

func testPutIfAbsentTwice(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	wantErr(t, "first PutIfAbsent", b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("winner")), nil)
	wantErr(t, "second PutIfAbsent", b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("loser")), objstore.ErrAlreadyExists)
	wantGet(t, b, "v/00000000000000000001.json", "winner")
	mustPut(t, b, "plain", "p")
	wantErr(t, "PutIfAbsent over Put", b.PutIfAbsent(ctx, "plain", []byte("q")), objstore.ErrAlreadyExists)
	wantGet(t, b, "plain", "p")
}

func testDeleteIdempotent(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	wantErr(t, "Delete absent", b.Delete(ctx, "never/was"), nil)
	mustPut(t, b, "d/k", "x")
	wantErr(t, "Delete", b.Delete(ctx, "d/k"), nil)
	wantErr(t, "second Delete", b.Delete(ctx, "d/k"), nil)
	_, err := b.Get(ctx, "d/k")
	wantErr(t, "Get after delete", err, objstore.ErrNotFound)
	wantErr(t, "PutIfAbsent after delete", b.PutIfAbsent(ctx, "d/k", []byte("again")), nil)
	// Deleting a "directory" is a no-op and removes nothing below it.
	mustPut(t, b, "d/sub/x", "y")
	wantErr(t, "Delete of a directory name", b.Delete(ctx, "d/sub"), nil)
	wantGet(t, b, "d/sub/x", "y")
}

func testListRecursiveSortedPrefix(t *testing.T, b *objstore.Bucket) {
	for _, k := range []string{"b/2", "c", "a/c", "a/b/d", "a-b", "a.x", "a/b/c", "b/1/x/y/z"} {
		mustPut(t, b, k, "v-"+k)
	}
	wantLists(t, "List", ListKeys, b, map[string][]string{
		"":       {"a-b", "a.x", "a/b/c", "a/b/d", "a/c", "b/1/x/y/z", "b/2", "c"},
		"a":      {"a-b", "a.x", "a/b/c", "a/b/d", "a/c"},
		"a/":     {"a/b/c", "a/b/d", "a/c"},
		"a/b":    {"a/b/c", "a/b/d"},
		"a/b/":   {"a/b/c", "a/b/d"},
		"a/b/c":  {"a/b/c"},
		"b/1/x/": {"b/1/x/y/z"},
		"zzz/":   {},
		"a/q/r/": {},
		"c/":     {},
	})
	objs, _ := b.List(context.Background(), "b/")
	if len(objs) != 2 || objs[1].Size != int64(len("v-b/2")) {
		t.Errorf("List sizes = %+v", objs)
	}
}

func testListDirs(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	for _, k := range []string{"top", "a/b/c", "a/x", "b-1/y", "b/2", "_registry/generic/gs.json", "_registry/rollout/r.json"} {
		mustPut(t, b, k, "v")
	}
	wantLists(t, "ListDirs", listDirs, b, map[string][]string{
		"":            {"_registry", "a", "b", "b-1"},
		"a":           {"b"},
		"a/":          {"b"},
		"a/b/":        {},
		"_registry/":  {"generic", "rollout"},
		"missing/":    {},
		"top/":        {},
		"_registry/g": {}, // names a directory "_registry/g/", which does not exist
	})
	// A directory whose last object is deleted disappears, as on an object store.
	wantErr(t, "Delete", b.Delete(ctx, "a/b/c"), nil)
	wantLists(t, "ListDirs after deleting a/b/c", listDirs, b, map[string][]string{"a/": {}, "": {"_registry", "a", "b", "b-1"}})
	wantErr(t, "Delete", b.Delete(ctx, "a/x"), nil)
	wantLists(t, "ListDirs after deleting a/x", listDirs, b, map[string][]string{"": {"_registry", "b", "b-1"}})
}

// testListPages: more keys than one listing page (1000 on S3, GCS and Azure): List must
// follow the continuation token, the delimiter listing must page too, and a ListPageBytes
// page that starts past the first backend page, or runs across its end, returns the keys
// right after its cursor.
func testListPages(t *testing.T, b *objstore.Bucket) {
	const many = 1100
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("p/%05d/x", i) }
	putMany(t, b, many, key)
	keys := ListKeys(t, b, "p/")
	if len(keys) != many || keys[0] != key(0) || keys[many-1] != key(many-1) {
		t.Fatalf("List over pages: %d keys (%q ... ), want %d", len(keys), keys[:min(len(keys), 3)], many)
	}
	dirs := listDirs(t, b, "p/")
	if len(dirs) != many || dirs[0] != "00000" || dirs[many-1] != fmt.Sprintf("%05d", many-1) {
		t.Fatalf("ListDirs over pages: %d dirs, want %d", len(dirs), many)
	}
	for _, start := range []int{0, 700, 999, 1000, 1050, many - 3} {
		objs, more, _, err := b.ListPageBytes(ctx, "p/", key(start), 500, 0, nil, nil)
		wantErr(t, "ListPageBytes(after "+key(start)+")", err, nil)
		want := []string{}
		for i := start + 1; i < min(start+501, many); i++ {
			want = append(want, key(i))
		}
		if got := keysOf(objs); !reflect.DeepEqual(got, want) || more != (start+1+500 < many) {
			t.Fatalf("ListPageBytes(after %q) = %d objects from %q, more %v; want %d from %q", key(start), len(got), got[:min(len(got), 1)], more, len(want), want[:min(len(want), 1)])
		}
	}
}

// testListPageStartAfter: ListPageBytes pages in key order (bytewise) from any cursor, including
// one that is no stored key, with keys whose order differs from a per-directory name order
// ("a.x" < "a/b" as keys, while the directory "a" sorts before "a.x" by name) and a prefix ending mid-segment.
func testListPageStartAfter(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	keys := []string{"q/a.x", "q/a/b", "q/a/c/d", "q/a0", "q/b", "q/bb/c", "q/z", "q/\u00e9", "r/a"}
	for _, k := range keys {
		mustPut(t, b, k, k)
	}
	want := keys[:len(keys)-1] // not r/a
	for _, limit := range []int{1, 2, 3, 100} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: ListPageBytes never ends (%q)", limit, got)
			}
			objs, more, _, err := b.ListPageBytes(ctx, "q/", after, limit, 0, nil, nil)
			wantErr(t, fmt.Sprintf("ListPageBytes(q/, %q, %d)", after, limit), err, nil)
			if len(objs) > limit {
				t.Fatalf("ListPageBytes(q/, %q, %d) = %d objects", after, limit, len(objs))
			}
			for _, o := range objs {
				got = append(got, o.Key)
				if o.Size != int64(len(o.Key)) {
					t.Errorf("ListPageBytes %q: size %d, want %d", o.Key, o.Size, len(o.Key))
				}
			}
			if !more {
				break
			}
			if len(objs) == 0 {
				t.Fatalf("limit %d: more with an empty page after %q", limit, after)
			}
			after = objs[len(objs)-1].Key
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ListPageBytes pages (limit %d) = %q, want %q", limit, got, want)
		}
	}
	for _, c := range []struct {
		prefix, after string
		want          []string
	}{
		{"q/", "q/a/b", []string{"q/a/c/d", "q/a0"}},   // a stored key
		{"q/", "q/a/", []string{"q/a/b", "q/a/c/d"}},   // a "directory"
		{"q/", "q/aa", []string{"q/b", "q/bb/c"}},      // between keys
		{"q/a", "q/a.x", []string{"q/a/b", "q/a/c/d"}}, // prefix mid-segment
		{"q/", "q/\u00e9", []string{}},                 // the last key
		{"q/", "p", []string{"q/a.x", "q/a/b"}},        // before the prefix
		{"q/", "zz", []string{}},                       // after the prefix
	} {
		objs, _, _, err := b.ListPageBytes(ctx, c.prefix, c.after, 2, 0, nil, nil)
		wantErr(t, fmt.Sprintf("ListPageBytes(%q, %q)", c.prefix, c.after), err, nil)
		if got := keysOf(objs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ListPageBytes(%q, after %q, 2) = %q, want %q", c.prefix, c.after, got, c.want)
		}
	}
}

// putMany writes n empty objects named by key, 8 at a time.
func putMany(t *testing.T, b *objstore.Bucket, n int, key func(int) string) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return b.Put(context.Background(), key(i), nil) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// testRepeatedWrites: repeated put-if-absent and put of a few keys leave exactly those keys
// (no temp or partial objects are ever listed).
func testRepeatedWrites(t *testing.T, b *objstore.Bucket) {
	for i := 0; i < 20; i++ {
		_ = b.PutIfAbsent(context.Background(), fmt.Sprintf("g/%02d", i%5), []byte("x"))
		mustPut(t, b, fmt.Sprintf("h/%02d", i%3), "y")
	}
	want := []string{"g/00", "g/01", "g/02", "g/03", "g/04", "h/00", "h/01", "h/02"}
	if got := ListKeys(t, b, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

func testInvalidKeys(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	bad := []string{"", "/a", "a/", "a//b", "./a", "a/./b", "../a", "a/..", "a\\b", "a\x00b",
		"a\nb", "\xff", ".tmp-x", "a/.tmp-y/b", strings.Repeat("k", 1025), strings.Repeat("s", 256) + "/x"}
	wantInvalid := func(op, arg string, err error) {
		if !errors.Is(err, objstore.ErrInvalidInput) {
			t.Errorf("%s(%q): %v, want ErrInvalidInput", op, arg, err)
		}
	}
	for _, k := range bad {
		_, err := b.Get(ctx, k)
		wantInvalid("Get", k, err)
		wantInvalid("Put", k, b.Put(ctx, k, []byte("x")))
		wantInvalid("PutIfAbsent", k, b.PutIfAbsent(ctx, k, []byte("x")))
		_, err = b.Exists(ctx, k)
		wantInvalid("Exists", k, err)
		wantInvalid("Delete", k, b.Delete(ctx, k))
	}
	for _, p := range []string{"/a", "a//", "../", "a/../b", "x\x01"} {
		_, err := b.List(ctx, p)
		wantInvalid("List", p, err)
		_, err = b.ListDirs(ctx, p)
		wantInvalid("ListDirs", p, err)
	}
	if got := ListKeys(t, b, ""); len(got) != 0 {
		t.Fatalf("invalid keys stored something: %q", got)
	}
}

func testContextAndClose(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "Put with cancelled ctx", b.Put(cctx, "k", []byte("x")), context.Canceled)
	if ok, _ := b.Exists(ctx, "k"); ok {
		t.Fatalf("cancelled Put stored the object")
	}
	mustPut(t, b, "k", "x")
	wantErr(t, "Close", b.Close(), nil)
	wantErr(t, "second Close", b.Close(), nil)
	_, err := b.Get(ctx, "k")
	wantErr(t, "Get after Close", err, objstore.ErrClosed)
	wantErr(t, "PutIfAbsent after Close", b.PutIfAbsent(ctx, "k2", nil), objstore.ErrClosed)
	_, err = b.List(ctx, "")
	wantErr(t, "List after Close", err, objstore.ErrClosed)
	var nb *objstore.Bucket
	if _, err := nb.Get(ctx, "k"); !errors.Is(err, objstore.ErrClosed) || nb.URL() != "" || nb.Close() != nil {
		t.Fatalf("nil bucket: %v", err)
	}
}

// testPutAtomicReplace overwrites one key in a loop while readers check they only ever see a
// complete old or new version: the property manifests and the registry rely on.
func testPutAtomicReplace(t *testing.T, b *objstore.Bucket) {
	ctx := context.Background()
	a := bytes.Repeat([]byte{'a'}, 64<<10)
	z := bytes.Repeat([]byte{'z'}, 48<<10)
	wantErr(t, "Put", b.Put(ctx, "m/manifest.json", a), nil)
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 2; r++ {
		wg.Go(func() {
			for !done.Load() {
				got, err := b.Get(ctx, "m/manifest.json")
				if err != nil || !bytes.Equal(got, a) && !bytes.Equal(got, z) {
					t.Errorf("Get during overwrite: %d bytes, %v; want one whole version (a torn read?)", len(got), err)
					return
				}
				reads.Add(1)
			}
		})
	}
	for i := range 100 {
		wantErr(t, "overwrite", b.Put(ctx, "m/manifest.json", [][]byte{z, a}[i%2]), nil)
	}
	// The readers may not have been scheduled yet on a loaded machine: wait for one read.
	for deadline := time.Now().Add(time.Minute); reads.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatalf("readers never ran")
	}
}

type recordedCall struct{ op, key string }

// testFaults exercises the reliability hook: injected errors stop the operation, latency is
// added, and a write can land while the caller is told it failed.
func testFaults(t *testing.T, base *objstore.Bucket) {
	ctx := context.Background()
	injected := errors.New("injected")

	// Before error: the operation is not performed.
	fb := base.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPut {
			return injected
		}
		return nil
	}})
	wantErr(t, "Put with Before fault", fb.Put(ctx, "x", []byte("1")), injected)
	if ok, _ := base.Exists(ctx, "x"); ok {
		t.Fatalf("faulted Put was performed")
	}

	// After error on success: landed, but reported as failed.
	lb := base.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op == objstore.OpPutIfAbsent && err == nil {
			return injected
		}
		return err
	}})
	wantErr(t, "PutIfAbsent with After fault", lb.PutIfAbsent(ctx, "v/1", []byte("landed")), injected)
	wantGet(t, base, "v/1", "landed")
	// The retry through the same faulty handle sees the real outcome.
	wantErr(t, "retry after landed write", lb.PutIfAbsent(ctx, "v/1", []byte("again")), objstore.ErrAlreadyExists)

	// Latency.
	sb := base.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	}})
	start := time.Now()
	_, err := sb.Get(ctx, "v/1")
	wantErr(t, "Get with latency", err, nil)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("latency not injected: %v", d)
	}

	// Every operation reports its name and key; the original handle is unaffected.
	var mu sync.Mutex
	var calls []recordedCall
	rb := base.WithFaults(objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, recordedCall{op, key})
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if op == objstore.OpGet && !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("After got %v for missing get", err)
			}
			return err
		},
	})
	_, _ = rb.Get(ctx, "missing")
	_ = rb.Put(ctx, "p/q", nil)
	_ = rb.PutIfAbsent(ctx, "p/r", nil)
	_, _ = rb.Exists(ctx, "p/q")
	_ = rb.Delete(ctx, "p/q")
	_, _ = rb.List(ctx, "p/")
	_, _ = rb.ListDirs(ctx, "p")
	_, _ = rb.Get(ctx, "bad//key") // invalid input never reaches the hook
	_ = base.Put(ctx, "unhooked", nil)
	want := []recordedCall{{objstore.OpGet, "missing"}, {objstore.OpPut, "p/q"}, {objstore.OpPutIfAbsent, "p/r"},
		{objstore.OpExists, "p/q"}, {objstore.OpDelete, "p/q"}, {objstore.OpList, "p/"}, {objstore.OpListDirs, "p/"}}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
	// Faults do not stack: a view made from a faulty view has only its own hook.
	nb := fb.WithFaults(nil)
	wantGet(t, nb, "v/1", "landed")
	wantErr(t, "Put through WithFaults(nil)", nb.Put(ctx, "y", nil), nil)
	// Views share the handle's lifetime.
	_ = rb.Close()
	_, err = base.Get(ctx, "v/1")
	wantErr(t, "base after closing a view", err, objstore.ErrClosed)
}
