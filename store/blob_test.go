package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"
)

var memSeq atomic.Int64

// fileURL turns a local directory into a file:// URL, escaping whatever needs it.
func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// newMemURL returns a mem:// URL no other test uses (mem buckets live for the process).
func newMemURL() string { return fmt.Sprintf("mem://blobtest-%d", memSeq.Add(1)) }

type testBackend struct {
	name string
	// open returns a fresh, empty bucket and, for file://, its root directory.
	open func(t *testing.T) (*Bucket, string)
}

func testBackends() []testBackend {
	return []testBackend{
		{"file", func(t *testing.T) (*Bucket, string) {
			// A root that does not exist yet: OpenBucket must create it.
			root := filepath.Join(t.TempDir(), "root", "nested")
			return mustOpen(t, fileURL(root)), root
		}},
		{"file-nosync", func(t *testing.T) (*Bucket, string) {
			root := t.TempDir()
			return mustOpen(t, fileURL(root)+"?nosync=1"), root
		}},
		{"mem", func(t *testing.T) (*Bucket, string) {
			return mustOpen(t, newMemURL()), ""
		}},
	}
}

func mustOpen(t *testing.T, u string) *Bucket {
	t.Helper()
	b, err := OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatalf("OpenBucket(%q): %v", u, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func mustPut(t *testing.T, b *Bucket, key, data string) {
	t.Helper()
	if err := b.Put(context.Background(), key, []byte(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, b *Bucket, key string) string {
	t.Helper()
	data, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(data)
}

func listKeys(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	objs, err := b.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	keys := []string{}
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func listDirs(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	dirs, err := b.ListDirs(context.Background(), prefix)
	if err != nil {
		t.Fatalf("ListDirs(%q): %v", prefix, err)
	}
	if dirs == nil {
		dirs = []string{}
	}
	return dirs
}

// tempFilesUnder returns every file:// temp file left under root.
func tempFilesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestBucketConformance runs the same contract over file:// (with and without fsync) and
// mem:// so the backends cannot drift apart: everything above store/ assumes identical keys
// and semantics.
func TestBucketConformance(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, b *Bucket, root string)
	}{
		{"GetMissing", func(t *testing.T, b *Bucket, _ string) {
			if _, err := b.Get(ctx, "a/b"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get missing: got %v, want ErrNotFound", err)
			}
			mustPut(t, b, "a/b/c", "x")
			// "a/b" is now a directory on file://; it is still not an object.
			if _, err := b.Get(ctx, "a/b"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a directory: got %v, want ErrNotFound", err)
			}
			if _, err := b.Get(ctx, "a/b/c/d"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get below an object: got %v, want ErrNotFound", err)
			}
			for _, k := range []string{"a/b", "nope", "a/b/c/d"} {
				if ok, err := b.Exists(ctx, k); err != nil || ok {
					t.Fatalf("Exists(%q) = %v, %v; want false, nil", k, ok, err)
				}
			}
		}},
		{"PutGetRoundTrip", func(t *testing.T, b *Bucket, _ string) {
			payload := []byte{0, 1, 2, 255, '\n', 'x'}
			if err := b.Put(ctx, "dir/obj.bin", payload); err != nil {
				t.Fatal(err)
			}
			got, err := b.Get(ctx, "dir/obj.bin")
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("Get = %v, %v; want %v", got, err, payload)
			}
			if ok, err := b.Exists(ctx, "dir/obj.bin"); err != nil || !ok {
				t.Fatalf("Exists = %v, %v", ok, err)
			}
			if err := b.Put(ctx, "empty", nil); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Get(ctx, "empty"); err != nil || len(got) != 0 {
				t.Fatalf("Get empty = %q, %v", got, err)
			}
			// Keys with spaces, unicode and characters gocloud's fileblob would escape.
			for _, k := range []string{"sp ace/ü.json", "x/__0x41__", "a:b@c=d+e", "x/y.attrs"} {
				mustPut(t, b, k, k)
				if got := mustGet(t, b, k); got != k {
					t.Fatalf("Get(%q) = %q", k, got)
				}
			}
			keys := listKeys(t, b, "")
			want := []string{"a:b@c=d+e", "dir/obj.bin", "empty", "sp ace/ü.json", "x/__0x41__", "x/y.attrs"}
			if !reflect.DeepEqual(keys, want) {
				t.Fatalf("List = %q, want %q", keys, want)
			}
		}},
		{"Overwrite", func(t *testing.T, b *Bucket, _ string) {
			mustPut(t, b, "k", "first version, longer")
			mustPut(t, b, "k", "second")
			if got := mustGet(t, b, "k"); got != "second" {
				t.Fatalf("Get after overwrite = %q", got)
			}
			objs, err := b.List(ctx, "")
			if err != nil || len(objs) != 1 || objs[0].Key != "k" || objs[0].Size != int64(len("second")) {
				t.Fatalf("List after overwrite = %+v, %v", objs, err)
			}
			if objs[0].ModTime.IsZero() {
				t.Fatalf("ModTime is zero")
			}
		}},
		{"PutIfAbsentTwice", func(t *testing.T, b *Bucket, _ string) {
			if err := b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("winner")); err != nil {
				t.Fatalf("first PutIfAbsent: %v", err)
			}
			err := b.PutIfAbsent(ctx, "v/00000000000000000001.json", []byte("loser"))
			if !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("second PutIfAbsent: got %v, want ErrAlreadyExists", err)
			}
			if got := mustGet(t, b, "v/00000000000000000001.json"); got != "winner" {
				t.Fatalf("content after lost race = %q, want winner", got)
			}
			mustPut(t, b, "plain", "p")
			if err := b.PutIfAbsent(ctx, "plain", []byte("q")); !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("PutIfAbsent over Put: got %v", err)
			}
			if got := mustGet(t, b, "plain"); got != "p" {
				t.Fatalf("content = %q", got)
			}
		}},
		{"DeleteIdempotent", func(t *testing.T, b *Bucket, _ string) {
			if err := b.Delete(ctx, "never/was"); err != nil {
				t.Fatalf("Delete absent: %v", err)
			}
			mustPut(t, b, "d/k", "x")
			for i := 0; i < 2; i++ {
				if err := b.Delete(ctx, "d/k"); err != nil {
					t.Fatalf("Delete #%d: %v", i, err)
				}
			}
			if _, err := b.Get(ctx, "d/k"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after delete: %v", err)
			}
			if err := b.PutIfAbsent(ctx, "d/k", []byte("again")); err != nil {
				t.Fatalf("PutIfAbsent after delete: %v", err)
			}
			// Deleting a "directory" is a no-op and removes nothing below it.
			mustPut(t, b, "d/sub/x", "y")
			if err := b.Delete(ctx, "d/sub"); err != nil {
				t.Fatalf("Delete of a directory name: %v", err)
			}
			if got := mustGet(t, b, "d/sub/x"); got != "y" {
				t.Fatalf("object under deleted dir name = %q", got)
			}
		}},
		{"ListRecursiveSortedPrefix", func(t *testing.T, b *Bucket, _ string) {
			for _, k := range []string{"b/2", "c", "a/c", "a/b/d", "a-b", "a.x", "a/b/c", "b/1/x/y/z"} {
				mustPut(t, b, k, "v-"+k)
			}
			checks := map[string][]string{
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
			}
			for prefix, want := range checks {
				if got := listKeys(t, b, prefix); !reflect.DeepEqual(got, want) {
					t.Errorf("List(%q) = %q, want %q", prefix, got, want)
				}
			}
			objs, _ := b.List(ctx, "b/")
			if len(objs) != 2 || objs[1].Size != int64(len("v-b/2")) {
				t.Errorf("List sizes = %+v", objs)
			}
		}},
		{"ListDirs", func(t *testing.T, b *Bucket, _ string) {
			for _, k := range []string{"top", "a/b/c", "a/x", "b-1/y", "b/2", "_registry/generic/gs.json", "_registry/rollout/r.json"} {
				mustPut(t, b, k, "v")
			}
			checks := map[string][]string{
				"":            {"_registry", "a", "b", "b-1"},
				"a":           {"b"},
				"a/":          {"b"},
				"a/b/":        {},
				"_registry/":  {"generic", "rollout"},
				"missing/":    {},
				"top/":        {},
				"_registry/g": {}, // names a directory "_registry/g/", which does not exist
			}
			for prefix, want := range checks {
				if got := listDirs(t, b, prefix); !reflect.DeepEqual(got, want) {
					t.Errorf("ListDirs(%q) = %q, want %q", prefix, got, want)
				}
			}
			// A directory whose last object is deleted disappears, as on an object store.
			if err := b.Delete(ctx, "a/b/c"); err != nil {
				t.Fatal(err)
			}
			if got := listDirs(t, b, "a/"); len(got) != 0 {
				t.Errorf("ListDirs after delete = %q, want none", got)
			}
			if got := listDirs(t, b, ""); !reflect.DeepEqual(got, []string{"_registry", "a", "b", "b-1"}) {
				t.Errorf("ListDirs root after delete = %q", got)
			}
			if err := b.Delete(ctx, "a/x"); err != nil {
				t.Fatal(err)
			}
			if got := listDirs(t, b, ""); !reflect.DeepEqual(got, []string{"_registry", "b", "b-1"}) {
				t.Errorf("ListDirs root after deleting a/ = %q", got)
			}
		}},
		{"NoTempFilesLeak", func(t *testing.T, b *Bucket, root string) {
			for i := 0; i < 20; i++ {
				k := fmt.Sprintf("g/%02d", i%5)
				_ = b.PutIfAbsent(ctx, k, []byte("x"))
				mustPut(t, b, fmt.Sprintf("h/%02d", i%3), "y")
			}
			want := []string{"g/00", "g/01", "g/02", "g/03", "g/04", "h/00", "h/01", "h/02"}
			if got := listKeys(t, b, ""); !reflect.DeepEqual(got, want) {
				t.Fatalf("List = %q, want %q", got, want)
			}
			if root != "" {
				if left := tempFilesUnder(t, root); len(left) != 0 {
					t.Fatalf("temp files left on disk: %q", left)
				}
			}
		}},
		{"InvalidKeys", func(t *testing.T, b *Bucket, _ string) {
			bad := []string{"", "/a", "a/", "a//b", "./a", "a/./b", "../a", "a/..", "a\\b", "a\x00b",
				"a\nb", "\xff", ".tmp-x", "a/.tmp-y/b", strings.Repeat("k", 1025), strings.Repeat("s", 256) + "/x"}
			for _, k := range bad {
				if _, err := b.Get(ctx, k); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("Get(%q): %v, want ErrInvalidInput", k, err)
				}
				if err := b.Put(ctx, k, []byte("x")); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("Put(%q): %v, want ErrInvalidInput", k, err)
				}
				if err := b.PutIfAbsent(ctx, k, []byte("x")); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("PutIfAbsent(%q): %v, want ErrInvalidInput", k, err)
				}
				if _, err := b.Exists(ctx, k); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("Exists(%q): %v, want ErrInvalidInput", k, err)
				}
				if err := b.Delete(ctx, k); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("Delete(%q): %v, want ErrInvalidInput", k, err)
				}
			}
			for _, p := range []string{"/a", "a//", "../", "a/../b", "x\x01"} {
				if _, err := b.List(ctx, p); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("List(%q): %v, want ErrInvalidInput", p, err)
				}
				if _, err := b.ListDirs(ctx, p); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("ListDirs(%q): %v, want ErrInvalidInput", p, err)
				}
			}
			if got := listKeys(t, b, ""); len(got) != 0 {
				t.Fatalf("invalid keys stored something: %q", got)
			}
		}},
		{"ContextAndClose", func(t *testing.T, b *Bucket, _ string) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := b.Put(cctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
				t.Fatalf("Put with cancelled ctx: %v", err)
			}
			if ok, _ := b.Exists(ctx, "k"); ok {
				t.Fatalf("cancelled Put stored the object")
			}
			mustPut(t, b, "k", "x")
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := b.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
				t.Fatalf("Get after Close: %v", err)
			}
			if err := b.PutIfAbsent(ctx, "k2", nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("PutIfAbsent after Close: %v", err)
			}
			if _, err := b.List(ctx, ""); !errors.Is(err, ErrClosed) {
				t.Fatalf("List after Close: %v", err)
			}
			var nb *Bucket
			if _, err := nb.Get(ctx, "k"); !errors.Is(err, ErrClosed) || nb.URL() != "" || nb.Close() != nil {
				t.Fatalf("nil bucket: %v", err)
			}
		}},
	}
	for _, be := range testBackends() {
		t.Run(be.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					b, root := be.open(t)
					tc.run(t, b, root)
				})
			}
		})
	}
}

// TestPutAtomicReplace overwrites one key in a loop while readers check they only ever see a
// complete old or new version: the property manifests and the registry rely on.
func TestPutAtomicReplace(t *testing.T) {
	ctx := context.Background()
	a := bytes.Repeat([]byte{'a'}, 64<<10)
	z := bytes.Repeat([]byte{'z'}, 48<<10)
	for _, be := range testBackends() {
		t.Run(be.name, func(t *testing.T) {
			b, _ := be.open(t)
			if err := b.Put(ctx, "m/manifest.json", a); err != nil {
				t.Fatal(err)
			}
			var done atomic.Bool
			var wg sync.WaitGroup
			var reads atomic.Int64
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !done.Load() {
						got, err := b.Get(ctx, "m/manifest.json")
						if err != nil {
							t.Errorf("Get during overwrite: %v", err)
							return
						}
						if !bytes.Equal(got, a) && !bytes.Equal(got, z) {
							t.Errorf("torn read: len %d", len(got))
							return
						}
						reads.Add(1)
					}
				}()
			}
			for i := 0; i < 100; i++ {
				data := a
				if i%2 == 0 {
					data = z
				}
				if err := b.Put(ctx, "m/manifest.json", data); err != nil {
					t.Fatal(err)
				}
			}
			done.Store(true)
			wg.Wait()
			if reads.Load() == 0 {
				t.Fatalf("readers never ran")
			}
		})
	}
}

func TestOpenBucketSchemes(t *testing.T) {
	// All five schemes must be registered (the drivers are imported by blob.go).
	for _, s := range []string{"file", "mem", "s3", "gs", "azblob"} {
		if !blob.DefaultURLMux().ValidBucketScheme(s) {
			t.Errorf("scheme %q not registered", s)
		}
	}
	ctx := context.Background()
	for _, u := range []string{"ftp://x/y", "nope", "file://otherhost/tmp/x", "file://", "mem://x?bogus=1", "%zz"} {
		b, err := OpenBucket(ctx, u)
		if err == nil {
			_ = b.Close()
			t.Errorf("OpenBucket(%q) succeeded, want error", u)
		}
	}
	if _, err := OpenBucket(ctx, "ftp://x/y"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unsupported scheme: %v, want ErrInvalidInput", err)
	}
	// An S3 URL opens without touching the network (credentials are resolved lazily).
	b, err := OpenBucket(ctx, "s3://walkeeper-test-bucket?region=us-east-1")
	if err != nil {
		t.Fatalf("OpenBucket s3: %v", err)
	}
	if b.URL() != "s3://walkeeper-test-bucket?region=us-east-1" {
		t.Errorf("URL() = %q", b.URL())
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close s3: %v", err)
	}
}

// TestFileBucketLayout checks the on-disk promises of file://: the root is created, objects
// are plain files at their key's path with no ".attrs" sidecars and no temp files left, and
// empty directories are pruned on delete.
func TestFileBucketLayout(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "a", "b")
	b := mustOpen(t, fileURL(root)+"?dir_file_mode=0755")
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		t.Fatalf("root not created: %v", err)
	}
	mustPut(t, b, "generic/gs/store.json", `{"kind":"generic"}`)
	if err := b.PutIfAbsent(ctx, "generic/gs/_versions/00000000000000000001.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	want := []string{"generic/gs/_versions/00000000000000000001.json", "generic/gs/store.json"}
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("files on disk = %q, want %q", files, want)
	}
	raw, err := os.ReadFile(filepath.Join(root, "generic", "gs", "store.json"))
	if err != nil || string(raw) != `{"kind":"generic"}` {
		t.Fatalf("object is not a plain file at its key path: %q, %v", raw, err)
	}
	if err := b.Delete(ctx, "generic/gs/_versions/00000000000000000001.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "generic", "gs", "_versions")); !os.IsNotExist(err) {
		t.Fatalf("empty _versions dir not pruned: %v", err)
	}
	if err := b.Delete(ctx, "generic/gs/store.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "generic")); !os.IsNotExist(err) {
		t.Fatalf("empty dirs not pruned up to root: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("root itself was pruned: %v", err)
	}
	// A file where a directory is needed is reported, not a panic.
	mustPut(t, b, "f", "x")
	if err := b.Put(ctx, "f/g", []byte("y")); err == nil {
		t.Fatalf("Put below an object succeeded on file://")
	}
}

// TestFileBucketHidesStrayTempFiles simulates temp files leaked by a crashed writer: no
// operation may ever report them as objects.
func TestFileBucketHidesStrayTempFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b := mustOpen(t, fileURL(root))
	mustPut(t, b, "s/real", "r")
	for _, p := range []string{".tmp-crash1", "s/.tmp-crash2", "onlytemp/.tmp-crash3", "deep/x/.tmp-crash4"} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := listKeys(t, b, ""); !reflect.DeepEqual(got, []string{"s/real"}) {
		t.Fatalf("List = %q", got)
	}
	if got := listKeys(t, b, "s/.t"); len(got) != 0 {
		t.Fatalf("List(s/.t) = %q", got)
	}
	if got := listDirs(t, b, ""); !reflect.DeepEqual(got, []string{"s"}) {
		t.Fatalf("ListDirs = %q (directories holding only temp files must not show)", got)
	}
	if _, err := b.Get(ctx, ".tmp-crash1"); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("Get of a temp name: %v", err)
	}
}

// TestMemBucketSharedByURL: several handles on one mem:// URL are one bucket; another URL is
// another bucket; closing a handle keeps the data for the others and for a reopen.
func TestMemBucketSharedByURL(t *testing.T) {
	ctx := context.Background()
	u := newMemURL()
	b1 := mustOpen(t, u)
	b2 := mustOpen(t, u)
	other := mustOpen(t, newMemURL())
	mustPut(t, b1, "k", "v")
	if got := mustGet(t, b2, "k"); got != "v" {
		t.Fatalf("second handle sees %q", got)
	}
	if err := b2.PutIfAbsent(ctx, "k", []byte("w")); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent through second handle: %v", err)
	}
	if _, err := other.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other URL sees the object: %v", err)
	}
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b2, "k"); got != "v" {
		t.Fatalf("after closing one handle: %q", got)
	}
	b3 := mustOpen(t, u)
	if got := mustGet(t, b3, "k"); got != "v" {
		t.Fatalf("after reopen: %q", got)
	}
	if b3.URL() != u {
		t.Fatalf("URL() = %q, want %q", b3.URL(), u)
	}
}

type recordedCall struct{ op, key string }

// TestBucketFaults exercises the reliability hook: injected errors stop the operation,
// latency is added, and a write can land while the caller is told it failed.
func TestBucketFaults(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	for _, be := range testBackends() {
		t.Run(be.name, func(t *testing.T) {
			base, _ := be.open(t)

			// Before error: the operation is not performed.
			fb := base.WithFaults(FaultFuncs{BeforeFunc: func(op, key string) error {
				if op == OpPut {
					return injected
				}
				return nil
			}})
			if err := fb.Put(ctx, "x", []byte("1")); !errors.Is(err, injected) {
				t.Fatalf("Put with Before fault: %v", err)
			}
			if ok, _ := base.Exists(ctx, "x"); ok {
				t.Fatalf("faulted Put was performed")
			}

			// After error on success: landed, but reported as failed.
			lb := base.WithFaults(FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == OpPutIfAbsent && err == nil {
					return injected
				}
				return err
			}})
			if err := lb.PutIfAbsent(ctx, "v/1", []byte("landed")); !errors.Is(err, injected) {
				t.Fatalf("PutIfAbsent with After fault: %v", err)
			}
			if got := mustGet(t, base, "v/1"); got != "landed" {
				t.Fatalf("landed write not visible: %q", got)
			}
			// The retry through the same faulty handle sees the real outcome.
			if err := lb.PutIfAbsent(ctx, "v/1", []byte("again")); !errors.Is(err, ErrAlreadyExists) {
				t.Fatalf("retry after landed write: %v", err)
			}

			// Latency.
			sb := base.WithFaults(FaultFuncs{BeforeFunc: func(op, key string) error {
				time.Sleep(30 * time.Millisecond)
				return nil
			}})
			start := time.Now()
			if _, err := sb.Get(ctx, "v/1"); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 30*time.Millisecond {
				t.Fatalf("latency not injected: %v", d)
			}

			// Every operation reports its name and key; the original handle is unaffected.
			var mu sync.Mutex
			var calls []recordedCall
			rb := base.WithFaults(FaultFuncs{
				BeforeFunc: func(op, key string) error {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, recordedCall{op, key})
					return nil
				},
				AfterFunc: func(op, key string, err error) error {
					if op == OpGet && !errors.Is(err, ErrNotFound) {
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
			want := []recordedCall{{OpGet, "missing"}, {OpPut, "p/q"}, {OpPutIfAbsent, "p/r"},
				{OpExists, "p/q"}, {OpDelete, "p/q"}, {OpList, "p/"}, {OpListDirs, "p/"}}
			if !reflect.DeepEqual(calls, want) {
				t.Fatalf("calls = %v, want %v", calls, want)
			}
			if nb := base.WithFaults(nil); mustGet(t, nb, "v/1") != "landed" {
				t.Fatalf("WithFaults(nil) is not a pass-through")
			}
			// Views share the handle's lifetime.
			_ = rb.Close()
			if _, err := base.Get(ctx, "v/1"); !errors.Is(err, ErrClosed) {
				t.Fatalf("base after closing a view: %v", err)
			}
		})
	}
}
