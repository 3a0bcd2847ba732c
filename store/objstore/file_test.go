package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The file:// backend's own promises, beyond the shared contract: what is on disk.

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
	require.NoError(t, b.PutIfAbsent(ctx, "generic/gs/_versions/00000000000000000001.json", []byte("{}")))
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
	require.NoError(t, b.Delete(ctx, "generic/gs/_versions/00000000000000000001.json"))
	if _, err := os.Stat(filepath.Join(root, "generic", "gs", "_versions")); !os.IsNotExist(err) {
		t.Fatalf("empty _versions dir not pruned: %v", err)
	}
	require.NoError(t, b.Delete(ctx, "generic/gs/store.json"))
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
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte("partial"), 0o644))
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

// TestFileBucketNoTempFilesLeak: repeated writes leave no temp file on disk, in either mode.
func TestFileBucketNoTempFilesLeak(t *testing.T) {
	ctx := context.Background()
	for _, be := range testBackends() {
		b, root := be.open(t)
		if root == "" {
			continue
		}
		t.Run(be.name, func(t *testing.T) {
			for i := 0; i < 20; i++ {
				_ = b.PutIfAbsent(ctx, fmt.Sprintf("g/%02d", i%5), []byte("x"))
				mustPut(t, b, fmt.Sprintf("h/%02d", i%3), "y")
			}
			if left := tempFilesUnder(t, root); len(left) != 0 {
				t.Fatalf("temp files left on disk: %q", left)
			}
		})
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
