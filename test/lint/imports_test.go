// Package lint holds tests over the code base itself rather than over its behaviour: the
// import rules that keep the layering of the README's "Repository layout" true. It lists the
// module with `go list -json` (what the build really links, not what a comment claims) and
// checks one table of rules, so adding a forbidden arrow fails the default test run.
package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/walkeeper/walkeeper"

// product is the code that ships in the walkeeper binary. A path that does not exist (yet) is
// skipped, so the table may name packages another branch introduces.
var product = []string{
	"cmd/walkeeper",
	"temporaladmin",
	"worker",
	"workflows",
	"activities",
	"store",
	"store/objstore",
	"store/rowcodec",
	"store/manifest",
	"contract",
	"target",
}

// harnesses are packages that only tests and benchmarks may link: every test harness lives
// under internal/testkit.
var harnesses = []string{
	module + "/internal/testkit",
	module + "/bench",
	module + "/test/",
	"github.com/johannesboyne/gofakes3",
	"gonum.org/",
}

// rule forbids the packages matching from (module-relative) to depend on any package
// matching a prefix in forbid (see matches) but none in allow. direct limits the check to the
// package's own imports, for packages a well-kept dependency links anyway (the Temporal SDK's
// internal package imports testing and testify for its test suite, so only our own import of
// them can be refused).
type rule struct {
	name   string
	from   []string
	forbid []string
	allow  []string
	direct bool
	// pending, when set, says why the rule does not hold on this branch yet: a violation
	// skips the rule instead of failing it, and a rule that holds while pending fails, so
	// that the marker is removed as soon as it is no longer needed.
	pending string
}

var rules = []rule{
	{
		name:   "store and its packages import no Temporal",
		from:   []string{"store"},
		forbid: []string{"go.temporal.io/"},
	},
	{
		name:   "the bucket layer imports neither the engine, the row codec nor the manifest",
		from:   []string{"store/objstore"},
		forbid: []string{module + "/store$", module + "/store/rowcodec", module + "/store/manifest"},
	},
	{
		name:   "the row codec imports neither the engine, the bucket layer nor the manifest",
		from:   []string{"store/rowcodec"},
		forbid: []string{module + "/store$", module + "/store/objstore", module + "/store/manifest"},
	},
	{
		name:   "the manifest model imports neither the engine nor the bucket layer",
		from:   []string{"store/manifest"},
		forbid: []string{module + "/store$", module + "/store/objstore"},
	},
	{
		name:   "the JSON scanner is a leaf",
		from:   []string{"internal/jsonscan"},
		forbid: []string{module + "/"},
	},
	{
		name:   "contract and target are leaves: of walkeeper they import only target and the JSON scanner",
		from:   []string{"contract", "target"},
		forbid: []string{module + "/"},
		allow:  []string{module + "/target", module + "/internal/jsonscan"},
	},
	{
		name:   "the bucket conformance suite needs only the bucket layer",
		from:   []string{"internal/testkit/bucketconformance"},
		forbid: []string{module + "/store$", module + "/store/rowcodec", module + "/store/manifest"},
	},
	{
		name:   "workflows import neither store nor activities",
		from:   []string{"workflows"},
		forbid: []string{module + "/store", module + "/activities"},
	},
	{
		name:   "the product links no test harness, benchmark or plotting",
		from:   product,
		forbid: harnesses,
	},
	{
		name:   "the product imports no testing package itself",
		from:   product,
		forbid: []string{"testing", "github.com/stretchr/testify/"},
		direct: true,
	},
	{
		name:   "only commands start dev servers",
		from:   []string{"worker", "temporaladmin", "workflows", "activities", "store", "contract", "target"},
		forbid: []string{module + "/internal/devserver"},
	},
	{
		name:   "temporaladmin runs no workflow code, reads no store and sits beside the worker",
		from:   []string{"temporaladmin"},
		forbid: []string{module + "/worker", module + "/workflows", module + "/activities", module + "/store", module + "/cmd/"},
	},
	{
		name:   "the test harnesses do not depend on the worker",
		from:   []string{"internal/testkit", "internal/devserver"},
		forbid: []string{module + "/worker", module + "/cmd/"},
	},
}

// pkg is the part of `go list -json` output the rules read.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list listed no packages")
	}
	return pkgs
}

// matches reports whether path is prefix or lies under it; a prefix ending in "/" matches
// everything below it, and one ending in "$" only the package it names.
func matches(path, prefix string) bool {
	if exact, ok := strings.CutSuffix(prefix, "$"); ok {
		return path == exact
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// violations lists, per checked package and forbidden prefix, what it links: "from -> dep",
// or "from -> prefix… (n packages, e.g. dep)" when it links several.
func (r rule) violations(pkgs map[string]pkg) (found []string, checked int) {
	for _, p := range pkgs {
		if !slices.ContainsFunc(r.from, func(f string) bool { return matches(p.ImportPath, module+"/"+f) }) {
			continue
		}
		checked++
		deps := p.Deps
		if r.direct {
			deps = p.Imports
		}
		for _, f := range r.forbid {
			var hits []string
			for _, d := range deps {
				if matches(d, f) && !slices.ContainsFunc(r.allow, func(a string) bool { return matches(d, a) }) {
					hits = append(hits, d)
				}
			}
			switch {
			case len(hits) == 1:
				found = append(found, p.ImportPath+" -> "+hits[0])
			case len(hits) > 1:
				sort.Strings(hits)
				found = append(found, fmt.Sprintf("%s -> %s… (%d packages, e.g. %s)", p.ImportPath, f, len(hits), hits[0]))
			}
		}
	}
	sort.Strings(found)
	return found, checked
}

func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the import rules need the go command: %v", err)
	}
	pkgs := listModule(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			found, checked := r.violations(pkgs)
			if checked == 0 {
				t.Fatalf("no package matches %v: the rule checks nothing (a package was renamed?)", r.from)
			}
			switch {
			case len(found) > 0 && r.pending != "":
				t.Skipf("pending: %s\n%d forbidden dependencies today, e.g. %s", r.pending, len(found), found[0])
			case len(found) > 0:
				t.Errorf("forbidden dependencies (go list -deps):\n  %s", strings.Join(found, "\n  "))
			case r.pending != "":
				t.Errorf("the rule holds now; remove its pending marker (%s)", r.pending)
			}
		})
	}
}
