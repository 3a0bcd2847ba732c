package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMutationPatchesApply keeps scripts/mutation-checks.sh runnable: every patch it names
// exists and still applies to today's code, and every patch is named by a check. The script
// runs outside the default suite, so without this a refactor silently turns a mutation into
// "the patch no longer applies" until someone runs it.
func TestMutationPatchesApply(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "mutation-checks.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, m := range regexp.MustCompile(`(?m)^\s+"([a-z0-9-]+)\|`).FindAllSubmatch(script, -1) {
		named = append(named, string(m[1]))
	}
	if len(named) == 0 {
		t.Fatal("scripts/mutation-checks.sh names no mutation: its check table changed shape")
	}
	patches, err := filepath.Glob(filepath.Join(repoRoot, "scripts", "mutations", "*.patch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range patches {
		if name := strings.TrimSuffix(filepath.Base(p), ".patch"); !slices.Contains(named, name) {
			t.Errorf("%s: no check in scripts/mutation-checks.sh runs it", p)
		}
	}
	for _, name := range named {
		cmd := exec.Command("git", "apply", "--check", filepath.Join("scripts", "mutations", name+".patch"))
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mutation %s no longer applies; re-make it against today's code: %v\n%s", name, err, out)
		}
	}
}
