package lint

// The stale-reference check: every repository path, file:line citation, walkeeper flag, HTTP
// route and search attribute that README.md, docs/ or a Go comment names must exist in the
// tree it ships with. Comments must also give a reason rather than point at an issue number or
// a benchmark run. The check reads only files (no build, no network), so it runs in about a
// second.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/walkeeper/walkeeper/contract"
)

const repoRoot = "../.."

// skipDirs are never indexed: git data and caches.
var skipDirs = map[string]bool{".git": true, ".cache": true, "node_modules": true, "vendor": true}

// tree indexes the repository once: every file's line count by path, and the paths of each
// base name, for citations of a bare file name with a line.
type tree struct {
	lines  map[string]int      // slash path from the root → number of lines
	dirs   map[string]bool     // slash path of every directory
	byBase map[string][]string // base name → paths
}

func indexTree(t *testing.T) *tree {
	tr := &tree{lines: map[string]int{}, dirs: map[string]bool{}, byBase: map[string][]string{}}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			tr.dirs[rel] = true
			return nil
		}
		n := -1 // counted on demand: most files are never cited with a line
		tr.lines[rel] = n
		tr.byBase[d.Name()] = append(tr.byBase[d.Name()], rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *tree) exists(p string) bool {
	_, f := tr.lines[p]
	return f || tr.dirs[p]
}

func (tr *tree) lineCount(p string) int {
	if n := tr.lines[p]; n >= 0 {
		return n
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, p))
	n := 0
	if err == nil {
		n = strings.Count(string(b), "\n")
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
	}
	tr.lines[p] = n
	return n
}

// glob reports whether a path pattern with * matches at least one file.
func (tr *tree) glob(pattern string) bool {
	for p := range tr.lines {
		if ok, _ := filepath.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// known holds the names the code defines: flags of walkeeper and walkeeper-bench, the HTTP
// routes' paths, and the search attributes workers register.
type known struct {
	flags  map[string]bool
	routes [][]string // each route's path split into segments
	attrs  map[string]bool
}

// flagFuncs are the pflag/cobra calls whose first string literal argument is a flag name,
// and the worker's knob table (workerKnob, temporalKnob, StringKnobVar).
var flagFuncs = regexp.MustCompile(`^(String|Bool|Int|Int64|Uint|Uint64|Float64|Duration|IntSlice|StringSlice|StringArray|Count|Var)(Var)?P?$|^StringKnobVar$|^[a-z]+Knob$`)

var routePattern = regexp.MustCompile(`^(GET|POST|PUT|DELETE|PATCH|HEAD) (/\S*)$`)

func loadKnown(t *testing.T) *known {
	k := &known{flags: map[string]bool{"help": true}, attrs: map[string]bool{}}
	for name := range contract.SearchAttributes {
		k.attrs[name] = true
	}
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "worker", "bench", "internal"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					case *ast.Ident:
						name = fn.Name
					}
					if !flagFuncs.MatchString(name) {
						return true
					}
					for _, a := range n.Args {
						if s, ok := stringLit(a); ok {
							k.flags[s] = true
							break
						}
					}
				case *ast.KeyValueExpr:
					if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Flag" {
						if s, ok := stringLit(n.Value); ok {
							k.flags[s] = true
						}
					}
				case *ast.BasicLit:
					if s, ok := stringLit(n); ok && strings.HasPrefix(p, filepath.Join(repoRoot, "worker")) {
						if m := routePattern.FindStringSubmatch(s); m != nil {
							k.routes = append(k.routes, strings.Split(strings.Trim(m[2], "/"), "/"))
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(k.flags) < 20 || len(k.routes) == 0 || len(k.attrs) == 0 {
		t.Fatalf("found %d flags, %d routes, %d search attributes: the code's layout changed under this test", len(k.flags), len(k.routes), len(k.attrs))
	}
	return k
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

// routeExists reports whether a documented path (concrete or with {wildcards}) is a prefix
// of, or equal to, a registered route's path.
func (k *known) routeExists(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range k.routes {
		if len(segs) > len(r) {
			continue
		}
		ok := true
		for i, s := range segs {
			if strings.HasPrefix(r[i], "{") || s == r[i] || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "<") {
				continue
			}
			ok = false
			break
		}
		if ok {
			return true
		}
	}
	return false
}

// A source line and where it is.
type line struct {
	file string
	num  int
	text string
	code bool // inside a fenced code block of a markdown file
	// build is the commit a fenced block names as the build that runs its commands ("```sh at
	// dfef433"): a benchmark record quotes command lines whose flags may since have left the
	// product with the design they selected, so only the commit is checked.
	build string
	goc   bool // a Go comment
}

var (
	urlRe = regexp.MustCompile(`[a-z][a-z0-9+.-]*://\S*|\bgithub\.com/\S*|\bgocloud\.dev/\S*|\bgo\.opentelemetry\.io/\S*`)
	// A repository path: a top-level directory of this repository, then at least one element.
	pathRe = regexp.MustCompile(`(?:^|[^\w./\-])(?:\./)?((?:cmd|worker|workflows|contract|activities|target|store|internal|bench|test|deploy|scripts|docs|\.ci)/[\w./\-*]*[\w*])(?::(\d+)(?:[-–](\d+))?)?`)
	// A bare file:line citation, `merge_wal.go:394`.
	bareCiteRe = regexp.MustCompile(`(?:^|[^\w./\-])([\w\-]+\.(?:go|md|sh|yml|yaml|json|mjs|tmpl)):(\d+)(?:[-–](\d+))?`)
	// What may follow a path that is a template rather than a file: store/<kind>, x-<n>.json.
	templateRest = regexp.MustCompile(`^[\w.\-]*[{<…$]`)
	// A Go identifier after a package path: internal/testkit/testtemporal.Start.
	goIdent = regexp.MustCompile(`\.[A-Z]\w*$`)
	// A directory a command creates: --out bench/results/run.
	outputFlag = regexp.MustCompile(`--(?:out|work-dir|data)[ =]$`)
	mdLinkRe   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// Flags of a walkeeper command line: after the command word, up to a pipe or comment.
	wkCmdRe = regexp.MustCompile(`(?:^|[\s\x60(/])walkeeper(?:-bench)?\s+([^|#;\x60]*)`)
	flagRe  = regexp.MustCompile(`(?:^|[\s\[(])--([a-z][a-z0-9-]*[a-z0-9])`)
	// A backticked flag on its own, with or without a value.
	loneFlagRe = regexp.MustCompile("`--([a-z][a-z0-9-]*[a-z0-9])(?:[ =][^`]*)?`")
	routeRe    = regexp.MustCompile(`(?:^|[^\w/])(/api/v1(?:/[\w{}.\-]+|/<\w+>)*|/healthz|/metrics)\b`)
	// A search attribute in a visibility query (WalPending > 100) or backticked on its own.
	attrQueryRe = regexp.MustCompile(`\b(Wal[A-Z][A-Za-z]*)\s*(?:=|!=|>|<|\bIN\b)`)
	attrLoneRe  = regexp.MustCompile("`(Wal[A-Z][A-Za-z]*)`")
	// Pointers that stand in for a reason in a Go comment.
	issueRe = regexp.MustCompile(`\b[Ii]ssue \d+`)
	benchRe = regexp.MustCompile(`BENCHMARKS(?:\.md)?\W{0,3}(?:§\s*\d+|[^.;)]*?\b(?:[Rr]un|[Ff]inding|[Ss]cenario)s? \d+)`)
)

// otherTool marks a line whose --flags belong to another program (go, temporal, curl…).
var otherTool = regexp.MustCompile(`(?:^|[\s\x60(])(?:go|temporal|curl|git|docker|psql|nice|flock|time|minio|chromium|node|npm|gofmt|kubectl|sed|grep|bash|scripts/[\w.\-]+)\s`)

func checkLine(l line, tr *tree, k *known, fail func(line, string)) {
	text := urlRe.ReplaceAllString(l.text, "")
	// Paths and path:line citations.
	for _, m := range pathRe.FindAllStringSubmatchIndex(text, -1) {
		p := text[m[2]:m[3]]
		if templateRest.MatchString(text[m[1]:]) || outputFlag.MatchString(text[:m[2]]) {
			continue // a template such as store/<kind>/…, or a directory a command will create
		}
		p = strings.TrimRight(p, ".")
		switch {
		case strings.Contains(p, "*"):
			if !tr.glob(p) {
				fail(l, p+" matches no file")
			}
			continue
		case !tr.exists(p) && !tr.exists(goIdent.ReplaceAllString(p, "")):
			fail(l, p+" does not exist")
			continue
		}
		if m[4] >= 0 {
			checkLineNumbers(l, tr, p, text[m[4]:m[5]], sub(text, m[6], m[7]), []string{p}, fail)
		}
	}
	for _, m := range bareCiteRe.FindAllStringSubmatchIndex(text, -1) {
		base := text[m[2]:m[3]]
		paths := tr.byBase[base]
		if len(paths) == 0 {
			fail(l, base+" does not exist")
			continue
		}
		checkLineNumbers(l, tr, base, text[m[4]:m[5]], sub(text, m[6], m[7]), paths, fail)
	}
	// Links from markdown, relative to the file.
	if !l.goc {
		for _, m := range mdLinkRe.FindAllStringSubmatch(l.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(l.file), target)))
			if !tr.exists(p) {
				fail(l, "link "+m[1]+" does not exist")
			}
		}
	}
	if l.build != "" {
		return
	}
	// Flags: on a walkeeper command line, or backticked on their own where no other tool's
	// command is on the line.
	for _, m := range wkCmdRe.FindAllStringSubmatchIndex(text, -1) {
		if otherTool.MatchString(text[:m[0]+1]) {
			continue // "walkeeper" as an argument of another tool, a task queue say
		}
		for _, f := range flagRe.FindAllStringSubmatch(text[m[2]:m[3]], -1) {
			if !k.flags[f[1]] {
				fail(l, "flag --"+f[1]+" is not a walkeeper or walkeeper-bench flag")
			}
		}
	}
	if !otherTool.MatchString(text) {
		for _, f := range loneFlagRe.FindAllStringSubmatch(text, -1) {
			if !k.flags[f[1]] {
				fail(l, "flag --"+f[1]+" is not a walkeeper or walkeeper-bench flag")
			}
		}
	}
	// Routes and search attributes.
	for _, m := range routeRe.FindAllStringSubmatch(text, -1) {
		if !k.routeExists(m[1]) {
			fail(l, "route "+m[1]+" is not registered in worker/")
		}
	}
	if !l.goc {
		for _, re := range []*regexp.Regexp{attrQueryRe, attrLoneRe} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				if !k.attrs[m[1]] {
					fail(l, "search attribute "+m[1]+" is not registered (contract.SearchAttributes)")
				}
			}
		}
	}
	if l.goc {
		if m := issueRe.FindString(text); m != "" {
			fail(l, `"`+m+`" stands in for a reason; say the reason`)
		}
		if m := benchRe.FindString(text); m != "" {
			fail(l, `"`+m+`" points into a benchmark record; say the reason`)
		}
	}
}

func sub(s string, i, j int) string {
	if i < 0 {
		return ""
	}
	return s[i:j]
}

// checkLineNumbers fails unless one of paths has at least the cited line(s).
func checkLineNumbers(l line, tr *tree, cited, from, to string, paths []string, fail func(line, string)) {
	n, _ := strconv.Atoi(from)
	if to != "" {
		if m, _ := strconv.Atoi(to); m > n {
			n = m
		}
	}
	for _, p := range paths {
		if tr.lineCount(p) >= n {
			return
		}
	}
	fail(l, cited+":"+strconv.Itoa(n)+" is past the end of the file")
}

// docLines yields README.md and docs/**/*.md line by line, marking fenced code.
func docLines(t *testing.T, tr *tree) []line {
	var files []string
	for p := range tr.lines {
		if p == "README.md" || (strings.HasPrefix(p, "docs/") && strings.HasSuffix(p, ".md")) {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	var out []line
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		code, build := false, ""
		for i, s := range strings.Split(string(b), "\n") {
			if fence, ok := strings.CutPrefix(strings.TrimSpace(s), "```"); ok {
				code, build = !code, ""
				if m := pastBuildRe.FindStringSubmatch(fence); code && m != nil {
					build = m[1]
					if !commitExists(t, build) {
						t.Errorf("%s:%d: build %s is no commit of this repository", f, i+1, build)
					}
				}
				continue
			}
			out = append(out, line{file: f, num: i + 1, text: s, code: code, build: build})
		}
	}
	return out
}

// commentLines yields every line of every comment of every Go file.
func commentLines(t *testing.T, tr *tree) []line {
	var out []line
	fset := token.NewFileSet()
	for p := range tr.lines {
		if !strings.HasSuffix(p, ".go") || strings.Contains("/"+p, "/testdata/") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, p), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				pos := fset.Position(c.Slash)
				for i, s := range strings.Split(c.Text, "\n") {
					out = append(out, line{file: p, num: pos.Line + i, text: s, goc: true})
				}
			}
		}
	}
	return out
}

// pastBuildRe reads the build a record's code block ran at from its info string.
var pastBuildRe = regexp.MustCompile(`^\w+ at ([0-9a-f]{7,40})$`)

// commitExists says whether the repository has the commit. A shallow clone may lack old
// commits, so there every commit is taken as present.
func commitExists(t *testing.T, commit string) bool {
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--is-shallow-repository").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	if strings.TrimSpace(string(out)) == "true" {
		return true
	}
	return exec.Command("git", "-C", repoRoot, "cat-file", "-e", commit+"^{commit}").Run() == nil
}

func TestDocsAndCommentsNameWhatExists(t *testing.T) {
	tr := indexTree(t)
	k := loadKnown(t)
	var failures []string
	fail := func(l line, why string) {
		failures = append(failures, l.file+":"+strconv.Itoa(l.num)+": "+why)
	}
	for _, l := range docLines(t, tr) {
		checkLine(l, tr, k, fail)
	}
	for _, l := range commentLines(t, tr) {
		checkLine(l, tr, k, fail)
	}
	slices.Sort(failures)
	for _, f := range failures {
		t.Error(f)
	}
}
