package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
)

// changePatch is build B's workflow change: a new activity in MergeWal behind a GetVersion
// gate, written as a developer would write it from v1 on.
const changePatch = "testdata/note-merge-plan.patch"

// builds are the two walkeeper binaries of the upgrade.
type builds struct {
	a, b string
	// overlay is the `go build -overlay` file that turns this tree into build B.
	overlay string
}

// buildAB builds A (the tree as it is) and B (the tree with changePatch applied, through a
// build overlay, so the checkout is never modified and unchanged packages come from the
// build cache).
func buildAB(t *testing.T, dir string) builds {
	t.Helper()
	bs := builds{overlay: overlayB(t, dir)}
	var err error
	if bs.a, err = walkeeperproc.Build(filepath.Join(dir, "walkeeper-a")); err != nil {
		t.Fatal(err)
	}
	if bs.b, err = walkeeperproc.Build(filepath.Join(dir, "walkeeper-b"), "-overlay", bs.overlay); err != nil {
		t.Fatal(err)
	}
	return bs
}

// overlayB writes, under dir, the `go build -overlay` file that turns this tree into build
// B, and returns its path. A patch that no longer applies fails the test: rewrite it against
// the tree.
func overlayB(t *testing.T, dir string) string {
	t.Helper()
	root, err := cachebin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	patch, err := filepath.Abs(changePatch)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "b-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files := patchedFiles(t, patch, src)
	for _, f := range files {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // a file the patch creates
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := gitApply(src, "--whitespace=nowarn", patch).CombinedOutput(); err != nil {
		t.Fatalf("%s no longer applies to this tree; rewrite the change against it (git apply: %v)\n%s", changePatch, err, out)
	}
	replace := map[string]string{}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			t.Fatalf("%s: %s missing after git apply: %v", changePatch, f, err)
		}
		replace[filepath.Join(root, f)] = filepath.Join(src, f)
	}
	raw, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay-b.json")
	if err := os.WriteFile(overlay, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// gitApply is `git apply args...` run in dir as a plain patch tool: inside a repository (the
// checkout, or a temp dir under one) git apply would skip the paths outside the current
// subdirectory instead of patching them.
func gitApply(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"apply"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	return cmd
}

// patchedFiles lists the module-relative files patch touches (git apply --numstat, in dir).
func patchedFiles(t *testing.T, patch, dir string) []string {
	t.Helper()
	out, err := gitApply(dir, "--numstat", patch).Output()
	if err != nil {
		t.Fatalf("git apply --numstat %s: %v", changePatch, err)
	}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 3 || strings.Contains(parts[2], "..") || filepath.IsAbs(parts[2]) {
			t.Fatalf("git apply --numstat %s: unexpected line %q", changePatch, sc.Text())
		}
		files = append(files, filepath.FromSlash(parts[2]))
	}
	if len(files) == 0 {
		t.Fatalf("%s touches no file", changePatch)
	}
	return files
}

// TestBuildBReplaysTheRecordedHistories runs the workflow replay tests
// (workflows/replay_test.go: every history recorded in workflows/testdata/replay) against
// build B's workflow code: a gated change replays the histories of the code before it. No
// Temporal server takes part, so the PostgreSQL lane of scripts/test.sh leaves it out.
func TestBuildBReplaysTheRecordedHistories(t *testing.T) {
	testtemporal.SkipShort(t)
	overlay := overlayB(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := walkeeperproc.Go(ctx, "test", "-ldflags=-w", "-overlay", overlay, "-count=1", "-v", "-run", "^TestReplay$", "./workflows")
	if err != nil {
		t.Fatalf("build B does not replay the recorded histories: %v\n%s", err, out)
	}
	n := strings.Count(string(out), "--- PASS: TestReplay/")
	if n == 0 {
		t.Fatalf("the replay tests ran no history on build B:\n%s", out)
	}
	t.Logf("build B replays all %d recorded histories", n)
}
