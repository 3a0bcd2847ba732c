package worker

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docs/API.md is the reference of the HTTP data plane. These tests hold it to the real router
// and to the error codes in httperr.go, in both directions.

const apiDocPath = "../docs/API.md"

// apiDocRoute is one row of the route table: "| `POST` | `/api/v1/...` | bearer | ... |".
type apiDocRoute struct {
	method, path string
	auth         bool // bearer token checked
}

func (r apiDocRoute) pattern() string { return r.method + " " + r.path }

var (
	apiDocRouteRow = regexp.MustCompile("^\\|\\s*`([A-Z]+)`\\s*\\|\\s*`(/[^`]*)`\\s*\\|\\s*(\\S+)\\s*\\|")
	apiDocCodeRow  = regexp.MustCompile("^\\|\\s*`([a-z_]+)`\\s*\\|\\s*(\\d{3})\\s*\\|")
	apiDocHeading  = regexp.MustCompile("^###\\s*`([A-Z]+) (/[^`]*)`\\s*$")
)

// apiDocSection returns the lines of the "## <title>" section of docs/API.md.
func apiDocSection(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("read %s: %v", apiDocPath, err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == title
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no section %q", apiDocPath, "## "+title)
	}
	return out
}

// apiDocRoutes parses the route table of docs/API.md, and the "### `METHOD /path`" headings
// of the per-route reference below it.
func apiDocRoutes(t *testing.T) (routes []apiDocRoute, headings []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range apiDocSection(t, "Routes") {
		if m := apiDocHeading.FindStringSubmatch(line); m != nil {
			headings = append(headings, m[1]+" "+m[2])
			continue
		}
		m := apiDocRouteRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := apiDocRoute{method: m[1], path: m[2]}
		switch m[3] {
		case "bearer":
			r.auth = true
		case "none":
		default:
			t.Errorf("%s: route %s: auth column %q is neither bearer nor none", apiDocPath, r.pattern(), m[3])
		}
		if seen[r.pattern()] {
			t.Errorf("%s lists route %s twice", apiDocPath, r.pattern())
		}
		seen[r.pattern()] = true
		routes = append(routes, r)
	}
	if len(routes) == 0 {
		t.Fatalf("%s: no route rows found in section Routes", apiDocPath)
	}
	return routes, headings
}

// samplePath fills a route pattern's wildcards with valid values.
func samplePath(pattern string) string {
	return strings.NewReplacer("{kind}", "generic", "{name}", "doc", "{id}", "a").Replace(pattern)
}

// registeredRoutes are the patterns of w's router, read from the series of
// walkeeper_http_panics_total that registering a route creates at 0.
func registeredRoutes(t *testing.T, w *Worker) []string {
	mfs, err := w.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, mf := range mfs {
		if mf.GetName() != "walkeeper_http_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() != "unmatched" {
					routes = append(routes, l.GetValue())
				}
			}
		}
	}
	return routes
}

func TestAPIDocListsEveryRoute(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	registered := registeredRoutes(t, w)
	if len(registered) == 0 {
		t.Fatal("the router reports no registered routes")
	}
	routes, headings := apiDocRoutes(t)
	var documented []string
	for _, r := range routes {
		documented = append(documented, r.pattern())
	}
	for _, p := range registered {
		if !slices.Contains(documented, p) {
			t.Errorf("route %q is registered but not in the route table of %s", p, apiDocPath)
		}
		if !slices.Contains(headings, p) {
			t.Errorf("route %q has no \"### `%s`\" reference section in %s", p, p, apiDocPath)
		}
	}
	for _, p := range documented {
		if !slices.Contains(registered, p) {
			t.Errorf("%s documents route %q, which the router does not register", apiDocPath, p)
		}
	}
	for _, h := range headings {
		if !slices.Contains(documented, h) {
			t.Errorf("%s has a reference section for %q, which is not in its route table", apiDocPath, h)
		}
	}
	// Each documented route, filled with sample values, reaches exactly its own pattern (no
	// other route shadows it).
	for _, r := range routes {
		req := httptest.NewRequest(r.method, samplePath(r.path), nil)
		if _, got := w.api.mux.Handler(req); got != r.pattern() {
			t.Errorf("%s %s is routed to %q, want %q", r.method, samplePath(r.path), got, r.pattern())
		}
	}
}

// TestAPIDocAuthColumn: with a token configured, a route marked "bearer" answers 401
// unauthorized without the token and something else with it; a route marked "none" never
// answers 401.
func TestAPIDocAuthColumn(t *testing.T) {
	const token = "api-doc-token"
	cfg := testConfig(t)
	cfg.AuthToken = token
	w := startWorker(t, cfg, nil)
	routes, _ := apiDocRoutes(t)
	for _, r := range routes {
		for _, withToken := range []bool{false, true} {
			req := httptest.NewRequest(r.method, samplePath(r.path), nil)
			if withToken {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			rec := httptest.NewRecorder()
			w.api.ServeHTTP(rec, req)
			got401 := rec.Code == http.StatusUnauthorized
			want401 := r.auth && !withToken
			if got401 != want401 {
				t.Errorf("%s (token sent: %v): status %d %s; %s says auth %v",
					r.pattern(), withToken, rec.Code, strings.TrimSpace(rec.Body.String()), apiDocPath, r.auth)
			}
			if got401 && !strings.Contains(rec.Body.String(), `"code":"`+CodeUnauthorized+`"`) {
				t.Errorf("%s: 401 without code %q: %s", r.pattern(), CodeUnauthorized, rec.Body.String())
			}
		}
	}
}

// httpErrorCodes reads the Code* constants of httperr.go: code -> the HTTP status that starts
// the constant's comment ("// 400: body is not JSON"), and constant name -> code.
func httpErrorCodes(t *testing.T) (statuses map[string]int, names map[string]string) {
	t.Helper()
	b, err := os.ReadFile("httperr.go")
	if err != nil {
		t.Fatal(err)
	}
	constRow := regexp.MustCompile(`^\s*(Code\w+)\s*=\s*"([^"]*)"\s*(?://\s*(\d{3})\b)?`)
	statuses, names = map[string]int{}, map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		m := constRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(m[3])
		if status == 0 {
			t.Errorf("httperr.go: %s has no comment starting with its HTTP status", m[1])
		}
		statuses[m[2]], names[m[1]] = status, m[2]
	}
	if len(statuses) == 0 {
		t.Fatal("httperr.go: no Code* constants found")
	}
	return statuses, names
}

func TestAPIDocListsEveryErrorCode(t *testing.T) {
	codes, _ := httpErrorCodes(t)
	documented := map[string]int{}
	for _, line := range apiDocSection(t, "Error codes") {
		m := apiDocCodeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("%s lists error code %q twice", apiDocPath, m[1])
		}
		documented[m[1]], _ = strconv.Atoi(m[2])
	}
	for code, status := range codes {
		got, ok := documented[code]
		switch {
		case !ok:
			t.Errorf("error code %q (%d) is in httperr.go but not in the error table of %s", code, status, apiDocPath)
		case got != status:
			t.Errorf("error code %q: %s says %d, httperr.go says %d", code, apiDocPath, got, status)
		}
	}
	for code := range documented {
		if _, ok := codes[code]; !ok {
			t.Errorf("%s lists error code %q, which httperr.go does not define", apiDocPath, code)
		}
	}
	// The statuses in httperr.go's comments (which the table is checked against) are the ones
	// classify really answers.
	errs := []error{&http.MaxBytesError{Limit: 1}, errors.New("unmarked")}
	for _, a := range errorAnswers {
		errs = append(errs, a.mark)
	}
	for _, err := range errs {
		ae := classify(err)
		if want, ok := codes[ae.Code]; !ok || ae.Status != want {
			t.Errorf("classify(%v) = %d %s; httperr.go documents %s as %d", err, ae.Status, ae.Code, ae.Code, want)
		}
	}
}

// TestAPIDocErrorStatusIsFixedPerCode: every place in the package that builds an HTTP error
// from a literal status and code (newAPIError(http.StatusX, CodeY, ...) or
// apiError{Status: ..., Code: ...}) uses the status httperr.go, and so docs/API.md, gives
// that code.
func TestAPIDocErrorStatusIsFixedPerCode(t *testing.T) {
	codes, names := httpErrorCodes(t)
	statusOf := map[string]int{
		"StatusBadRequest": http.StatusBadRequest, "StatusUnauthorized": http.StatusUnauthorized, "StatusForbidden": http.StatusForbidden,
		"StatusNotFound": http.StatusNotFound, "StatusMethodNotAllowed": http.StatusMethodNotAllowed,
		"StatusConflict": http.StatusConflict, "StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge,
		"StatusUnsupportedMediaType": http.StatusUnsupportedMediaType, "StatusClientClosedRequest": StatusClientClosedRequest,
		"StatusInternalServerError": http.StatusInternalServerError, "StatusServiceUnavailable": http.StatusServiceUnavailable,
		"StatusGatewayTimeout": http.StatusGatewayTimeout,
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatalf("parse package: %v", err)
	}
	check := func(at token.Pos, statusExpr, codeExpr ast.Expr) {
		where := fset.Position(at).String()
		codeID, ok := codeExpr.(*ast.Ident)
		if !ok || !strings.HasPrefix(codeID.Name, "Code") {
			return // a code passed in or computed at run time; classify's check covers those
		}
		code, ok := names[codeID.Name]
		if !ok {
			t.Errorf("%s: error code %s is not a constant of httperr.go", where, codeID.Name)
			return
		}
		var statusName string
		switch e := statusExpr.(type) {
		case *ast.SelectorExpr:
			statusName = e.Sel.Name
		case *ast.Ident:
			statusName = e.Name
		default:
			t.Errorf("%s: status of %s is not a named constant", where, code)
			return
		}
		status, ok := statusOf[statusName]
		if !ok {
			t.Errorf("%s: status %s for %s is not known to this test; add it", where, statusName, code)
			return
		}
		if status != codes[code] {
			t.Errorf("%s: %s answered with %d, httperr.go and %s say %d", where, code, status, apiDocPath, codes[code])
		}
	}
	sites := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "newAPIError" && len(n.Args) >= 2 {
						sites++
						check(n.Pos(), n.Args[0], n.Args[1])
					}
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "apiError" {
						var st, cd ast.Expr
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok {
								switch k, _ := kv.Key.(*ast.Ident); {
								case k != nil && k.Name == "Status":
									st = kv.Value
								case k != nil && k.Name == "Code":
									cd = kv.Value
								}
							}
						}
						if st != nil && cd != nil {
							sites++
							check(n.Pos(), st, cd)
						}
					}
				}
				return true
			})
		}
	}
	if sites < 10 {
		t.Fatalf("found only %d places that build an HTTP error; the scan is broken", sites)
	}
}
