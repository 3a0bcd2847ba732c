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

// allowedLabels is what a selector of ref may match on: the metric's own labels, the target
// labels Prometheus adds, and le on a histogram's buckets.
func allowedLabels(metrics map[string]metric, ref string) (map[string]bool, bool) {
	allowed := map[string]bool{"instance": true, "job": true}
	own, ok := metrics[ref]
	if !ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(ref, suffix); base != ref {
				if own, ok = metrics[base]; ok {
					allowed["le"] = suffix == "_bucket"
					break
				}
			}
		}
	}
	for _, l := range own.labels {
		allowed[l] = true
	}
	return allowed, ok
}

var (
	selectorRef  = regexp.MustCompile(`\b(walkeeper_[a-z0-9_]+)\{([^}]*)\}`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingRef  = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// A matcher on a label the metric does not have selects nothing, so an alert or panel built
// on it never fires or shows anything, and promtool's tests, whose series are written by
// hand, cannot tell: every selector of a walkeeper metric must name its real labels.
func TestSelectorsUseRegisteredLabels(t *testing.T) {
	metrics := registeredMetrics(t)
	for _, file := range []string{"deploy/prometheus-rules.yml", "deploy/prometheus-rules.test.yml",
		"deploy/grafana-dashboard.json", "docs/OPERATIONS.md"} {
		seen := 0
		for _, m := range selectorRef.FindAllStringSubmatch(readFile(t, file), -1) {
			allowed, ok := allowedLabels(metrics, m[1])
			if !ok {
				continue // TestOperationsDocListsEveryMetric and its kin report unknown names
			}
			seen++
			for _, lm := range matcherLabel.FindAllStringSubmatch(m[2], -1) {
				if !allowed[lm[1]] {
					t.Errorf("%s: %s matches on label %q, which the metric does not have", file, m[0], lm[1])
				}
			}
		}
		if seen == 0 && file != "docs/OPERATIONS.md" {
			t.Errorf("%s: no selector with labels found; is the pattern still right?", file)
		}
	}
}

// An alert that aggregates by a label none of its metrics has puts every series in one group
// and loses what its summary names: each by/without clause of a rule names labels of the
// walkeeper metrics in that rule.
func TestAlertGroupingUsesRegisteredLabels(t *testing.T) {
	metrics := registeredMetrics(t)
	grouped := 0
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			allowed := map[string]bool{}
			for _, ref := range metricRef.FindAllString(r.Expr, -1) {
				own, _ := allowedLabels(metrics, ref)
				for l := range own {
					allowed[l] = own[l] || allowed[l]
				}
			}
			if len(allowed) == 0 {
				continue // no walkeeper metric: a Temporal server rule
			}
			for _, m := range groupingRef.FindAllStringSubmatch(r.Expr, -1) {
				grouped++
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); l != "" && !allowed[l] {
						t.Errorf("alert %s groups by %q, which none of its walkeeper metrics has", r.Alert, l)
					}
				}
			}
		}
	}
	if grouped < 10 {
		t.Fatalf("found only %d by/without clauses; is the pattern still right?", grouped)
	}
}

// workerMetricFiles parses the worker's metrics*.go files (not their tests), where the worker
// registers its metrics.
func workerMetricFiles(t *testing.T, repoRoot string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "worker", "metrics*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// optsFields is the string-literal fields (Namespace, Subsystem, Name, Help…) of a
// prometheus *Opts literal.
func optsFields(opts *ast.CompositeLit) map[string]string {
	fields := map[string]string{}
	for _, e := range opts.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		val, _ := kv.Value.(*ast.BasicLit)
		if key != nil && val != nil && val.Kind == token.STRING {
			if s, err := strconv.Unquote(val.Value); err == nil {
				fields[key.Name] = s
			}
		}
	}
	return fields
}
