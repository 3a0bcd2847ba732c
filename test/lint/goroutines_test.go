package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// stopsTheTest reports whether a call to fn ends the test that made it: t.Fatal and its kin,
// testify's require, and this repository's must* helpers, which call t.Fatal. Each stops only
// the goroutine it runs in (runtime.Goexit), so called from a goroutine of the test's own it
// leaves the test running on as if the check had passed.
func stopsTheTest(fn ast.Expr) (string, bool) {
	switch f := fn.(type) {
	case *ast.Ident:
		return f.Name, strings.HasPrefix(f.Name, "must")
	case *ast.SelectorExpr:
		name := f.Sel.Name
		if x, ok := f.X.(*ast.Ident); ok {
			if x.Name == "require" {
				return "require." + name, true
			}
			name = x.Name + "." + name
		}
		switch f.Sel.Name {
		case "Fatal", "Fatalf", "FailNow", "Skip", "Skipf", "SkipNow":
			return name, true
		}
		return name, strings.HasPrefix(f.Sel.Name, "must")
	}
	return "", false
}

// goroutineBodies are the functions a node starts on goroutines of their own: the call of a
// go statement, and the function literal given to a Go method (sync.WaitGroup, errgroup).
func goroutineBodies(n ast.Node) []ast.Node {
	switch s := n.(type) {
	case *ast.GoStmt:
		return []ast.Node{s.Call}
	case *ast.CallExpr:
		if sel, ok := s.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" && len(s.Args) == 1 {
			if lit, ok := s.Args[0].(*ast.FuncLit); ok {
				return []ast.Node{lit}
			}
		}
	}
	return nil
}

// A goroutine a test starts reports with t.Error and returns; what stops the test runs on the
// test's own goroutine.
func TestGoroutinesDoNotStopTheTest(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p, "_test.go") && !importsTesting(f) {
			return nil
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			for _, body := range goroutineBodies(n) {
				ast.Inspect(body, func(m ast.Node) bool {
					if c, ok := m.(*ast.CallExpr); ok {
						if name, stops := stopsTheTest(c.Fun); stops {
							rel, _ := filepath.Rel(repoRoot, fset.Position(c.Pos()).Filename)
							found = append(found, rel+":"+strconv.Itoa(fset.Position(c.Pos()).Line)+": "+name)
						}
					}
					return true
				})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no test file found: the check checks nothing")
	}
	// A go statement inside another goroutine's body is met twice.
	slices.Sort(found)
	found = slices.Compact(found)
	if len(found) > 0 {
		t.Errorf("a call that stops the test runs on a goroutine the test started, where it stops only that goroutine; report with t.Error and return, or make the call before the goroutine starts:\n  %s",
			strings.Join(found, "\n  "))
	}
}

func importsTesting(f *ast.File) bool {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"testing"` {
			return true
		}
	}
	return false
}
