package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestComposeImageKeyIsTheContentsNotTheMtimes: the compose stage keeps a stand-in image
// while its key is unchanged. The key once hashed each context file's mtime, and a clean
// clone's scripts are new files with the same bytes, so every clean clone rebuilt the
// postgres and temporal server images (a minute of sending the server binary). Now the same
// bytes under new mtimes keep the key, and a changed byte, mode, file name or build
// argument changes it.
func TestComposeImageKeyIsTheContentsNotTheMtimes(t *testing.T) {
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile")
	ctx := filepath.Join(dir, "ctx")
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(df, "FROM scratch\nCOPY . /\n")
	write(filepath.Join(ctx, "entrypoint.sh"), "#!/bin/sh\nexec server\n")
	write(filepath.Join(ctx, "bin", "server"), "binary")
	key := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts/compose-ci.sh"), "--image-key", df, ctx}, args...)...).Output()
		if err != nil {
			t.Fatalf("compose-ci.sh --image-key: %v", err)
		}
		k := strings.TrimSpace(string(out))
		if len(k) != 16 {
			t.Fatalf("compose-ci.sh --image-key printed %q, want 16 hex digits", k)
		}
		return k
	}
	base := key("--build-arg", "BASE=1")

	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []string{"entrypoint.sh", "bin/server"} {
		if err := os.Chtimes(filepath.Join(ctx, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if got := key("--build-arg", "BASE=1"); got != base {
		t.Errorf("new mtimes, same bytes: key %s, want %s", got, base)
	}

	if err := os.Chmod(filepath.Join(ctx, "entrypoint.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if key("--build-arg", "BASE=1") == base {
		t.Error("an entrypoint made executable kept the key")
	}

	write(filepath.Join(ctx, "entrypoint.sh"), "#!/bin/sh\nexec server --flag\n")
	changed := key("--build-arg", "BASE=1")
	if changed == base {
		t.Error("a changed file kept the key")
	}
	if err := os.Rename(filepath.Join(ctx, "bin", "server"), filepath.Join(ctx, "bin", "server2")); err != nil {
		t.Fatal(err)
	}
	if key("--build-arg", "BASE=1") == changed {
		t.Error("a renamed file kept the key")
	}
	if key("--build-arg", "BASE=2") == key("--build-arg", "BASE=1") {
		t.Error("another build argument kept the key")
	}
}
