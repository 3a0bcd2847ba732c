package objstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFileURLRelativePath pins how a file:// URL names a relative root: "file://./<path>" is
// resolved against the working directory, and "file://<path>" (whose first element parses as
// a host) is refused with the URL that was meant, before anything is created.
func TestFileURLRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx := context.Background()

	b, err := OpenBucket(ctx, "file://./.cache/dev/storage")
	require.NoError(t, err, "file://./ relative path")
	require.NoError(t, b.Put(ctx, "k", []byte("v")))
	require.NoError(t, b.Close())
	require.FileExists(t, filepath.Join(dir, ".cache", "dev", "storage", "k"), "the object is under the working directory")

	_, err = OpenBucket(ctx, "file://.cache/other/storage")
	require.ErrorIs(t, err, ErrInvalidInput, "file://<relative> without ./")
	require.EqualError(t, err, `invalid input: storage url "file://.cache/other/storage": file:// takes no host (here ".cache"); for a relative path write file://./.cache/other/storage, for an absolute one file:///<path>`)
	_, err = os.Stat(filepath.Join(dir, ".cache", "other"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a refused URL created nothing")
}

// TestFileURLParameters: only a nosync value that says yes skips fsync, so "nosync=0" keeps
// every write durable; a value that says neither, a parameter twice, a parameter file:// does
// not take (gocloud's fileblob ones included: file:// does not go through it) and a malformed
// query are refused before the root is created.
func TestFileURLParameters(t *testing.T) {
	ctx := context.Background()
	for query, want := range map[string]bool{"": false, "?nosync=1": true, "?nosync=true": true,
		"?nosync=0": false, "?nosync=false": false, "?dir_file_mode=0750&nosync=FALSE": false} {
		b, err := OpenBucket(ctx, fileURL(t.TempDir())+query)
		require.NoError(t, err, query)
		require.Equal(t, want, b.core.be.(*fileBackend).noSync, "%q: nosync", query)
		_ = b.Close()
	}
	for _, query := range []string{"?nosync=maybe", "?nosync=", "?nosync=1&nosync=0", "?nosync=yes",
		"?no_tmp_dir=1", "?create_dir=0", "?metadata=skip", "?nosync=1&bogus=1", "?nosync=%zz", "?dir_file_mode=rwx"} {
		root := filepath.Join(t.TempDir(), "root")
		if _, err := OpenBucket(ctx, fileURL(root)+query); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%q: %v, want ErrInvalidInput", query, err)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("%q: a refused URL created its root (stat: %v)", query, err)
		}
	}
	// A root that is a file is no directory to keep objects in.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	if b, err := OpenBucket(ctx, fileURL(file)); err == nil {
		_ = b.Close()
		t.Errorf("a root that is a file opened")
	}
	// The root is created with dir_file_mode, under the umask.
	root := filepath.Join(t.TempDir(), "a", "b")
	b, err := OpenBucket(ctx, fileURL(root)+"?dir_file_mode=0700")
	require.NoError(t, err)
	_ = b.Close()
	fi, err := os.Stat(root)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "the root's mode")
}
