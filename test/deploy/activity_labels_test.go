package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// activityNames reads the activity type names from the *Activity constants of
// contract/names.go, the names walkeeper_activity_executions_total's activity label takes.
func activityNames(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "contract", "names.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || len(spec.Values) != 1 || !strings.HasSuffix(spec.Names[0].Name, "Activity") {
			return true
		}
		if lit, ok := spec.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				names[s] = true
			}
		}
		return true
	})
	if len(names) < 5 {
		t.Fatalf("found only %d activity names in contract/names.go: %v", len(names), names)
	}
	return names
}

// activityMatcher finds activity label matchers in PromQL, also inside JSON strings
// (activity=~\"A|B\"): the value is every alternative of an = or =~ matcher.
var activityMatcher = regexp.MustCompile(`activity=~?\\?"([A-Za-z|]+)\\?"`)

// A rule or panel that names an activity no worker runs matches nothing and stays silent:
// the activity-failure alert and its dashboard panel still named "Commit" after the
// activity became CommitRound.
func TestActivityLabelsNameRealActivities(t *testing.T) {
	names := activityNames(t)
	for _, file := range []string{"deploy/prometheus-rules.yml", "deploy/prometheus-rules.test.yml",
		"deploy/grafana-dashboard.json", "docs/OPERATIONS.md"} {
		text := readFile(t, file)
		matches := activityMatcher.FindAllStringSubmatch(text, -1)
		if len(matches) == 0 && file != "docs/OPERATIONS.md" {
			t.Errorf("%s: no activity label matcher found; is the pattern still right?", file)
		}
		for _, m := range matches {
			for _, name := range strings.Split(m[1], "|") {
				if !names[name] {
					t.Errorf("%s: activity label %q in %s is no registered activity (contract/names.go)", file, name, m[0])
				}
			}
		}
	}
}
