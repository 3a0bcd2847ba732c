package objstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	require.DirExists(t, root, "the root is created")
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
	require.Equal(t, want, files, "files on disk")
	raw, err := os.ReadFile(filepath.Join(root, "generic", "gs", "store.json"))
	require.NoError(t, err)
	require.Equal(t, `{"kind":"generic"}`, string(raw), "an object is a plain file at its key's path")
	require.NoError(t, b.Delete(ctx, "generic/gs/_versions/00000000000000000001.json"))
	_, err = os.Stat(filepath.Join(root, "generic", "gs", "_versions"))
	require.ErrorIs(t, err, fs.ErrNotExist, "the empty _versions directory is pruned")
	require.NoError(t, b.Delete(ctx, "generic/gs/store.json"))
	_, err = os.Stat(filepath.Join(root, "generic"))
	require.ErrorIs(t, err, fs.ErrNotExist, "empty directories are pruned up to the root")
	require.DirExists(t, root, "the root itself is not pruned")
	// A file where a directory is needed is reported, not a panic.
	mustPut(t, b, "f", "x")
	require.Error(t, b.Put(ctx, "f/g", []byte("y")), "Put below an object")
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
	require.Equal(t, []string{"s/real"}, listKeys(t, b, ""))
	require.Empty(t, listKeys(t, b, "s/.t"))
	require.Equal(t, []string{"s"}, listDirs(t, b, ""), "directories holding only temp files do not show")
	_, err := b.Get(ctx, ".tmp-crash1")
	require.ErrorIs(t, err, ErrInvalidInput, "Get of a temp name")
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
			require.Empty(t, tempFilesUnder(t, root), "temp files left on disk")
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
	require.Empty(t, listKeys(t, b, ""), "left over")
}
