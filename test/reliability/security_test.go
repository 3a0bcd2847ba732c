package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// Security checks at the process boundary. What worker/http_test.go already
// covers is not repeated: TestHTTPAuth (401 basics, case-insensitive scheme, /healthz open),
// TestHTTPListenDefaultIsLoopback (DefaultConfig), TestHTTPBadInputWritesNothing (".." and
// "%2F" names), temporaladmin/dial_test.go TestConfigTLS (TLS and API-key options).

// TestSecurityBinaryListensOnLoopbackByDefault: the shipped binary's flag default (what a
// user gets with no --listen and no WALKEEPER_LISTEN) is a loopback address.
func TestSecurityBinaryListensOnLoopbackByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/walkeeper")
	}
	bin := buildWalkeeper(t)
	cmd := exec.Command(bin, "worker", "--help")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"} // no WALKEEPER_* in the environment
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "walkeeper worker --help: %s", out)
	m := regexp.MustCompile(`--listen string[^\n]*\(default "([^"]+)"\)`).FindSubmatch(out)
	require.NotNil(t, m, "no --listen default in:\n%s", out)
	host, _, err := net.SplitHostPort(string(m[1]))
	require.True(t, err == nil && net.ParseIP(host).IsLoopback(), "walkeeper worker listens on %q by default, want a loopback address", m[1])
	cfg := worker.DefaultConfig()
	cfg.RegisterFlags(pflag.NewFlagSet("worker", pflag.ContinueOnError))
	if h, _, _ := net.SplitHostPort(cfg.Listen); !net.ParseIP(h).IsLoopback() && os.Getenv("WALKEEPER_LISTEN") == "" {
		t.Fatalf("the worker's configuration without WALKEEPER_LISTEN listens on %q", cfg.Listen)
	}
}

const secToken = "rel-s3cret-token-0123456789"

// startSecWorker starts an HTTP-only worker (bearer token on) over file://<dir>/storage.
func startSecWorker(t *testing.T, dir string) *worker.Worker {
	t.Helper()
	cfg := worker.DefaultConfig()
	cfg.Instance = "sec"
	cfg.Storage = "file://" + filepath.Join(dir, "storage")
	cfg.Listen = "127.0.0.1:0"
	cfg.AuthToken = secToken
	cfg.FlushInterval = 0
	cfg.SweepInterval = 0
	w, err := worker.New(cfg, zap.NewNop(), nil)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// rawRequest sends one request with the exact request-target given (no client-side path
// cleaning or escaping) and returns the status code.
func rawRequest(t *testing.T, addr, method, target, token, body string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, addr)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	require.NoError(t, errOf(conn.Write([]byte(b.String()))))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "%s %s", method, target)
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&sb)
	return res.StatusCode, sb.String()
}

var hostileNames = []string{
	"..", ".", "%2e%2e", "%2E%2E", ".%2e", "..%2f..%2fescape", "a%2f..%2f..%2fescape", "%2e%2e%2f%2e%2e%2fescape",
	"..%5c..%5cescape", "a%5cb", "a%00b", "%00", "_registry", "_stats", "%5fregistry", "%252e%252e", "%c0%ae%c0%ae",
	"%ef%bc%8e%ef%bc%8e", "a:b", "a%3ab", "%20", "-lead", "a%0ab", "%e2%80%ae", strings.Repeat("n", 129),
	"..%252f..%252fescape", "~root", "%7e",
}

// TestSecurityHostileNamesNeverEscapeTheRoot: every route that takes a kind and a name is
// sent every hostile name (escaped separators, dot segments, NUL, reserved names, overlong
// and look-alike encodings) with a valid token. Each answer must be a 3xx/4xx (no 2xx: no
// store is created or touched; no 5xx), and afterwards no file may exist outside the storage
// root, and the root may hold only the one legitimate store.
func TestSecurityHostileNamesNeverEscapeTheRoot(t *testing.T) {
	dir := t.TempDir()
	w := startSecWorker(t, dir)
	addr := w.HTTPAddr()
	schema := `{"fields":[{"name":"id","type":"string"},{"name":"v","type":"int64"}]}`
	code, body := rawRequest(t, addr, "POST", "/api/v1/stores/generic/legit", secToken, schema)
	require.Equal(t, http.StatusCreated, code, "create legit: %s", body)
	routes := []struct{ method, suffix, body string }{
		{"POST", "", schema},
		{"POST", "/rows", `[{"id":"x","v":1}]`},
		{"GET", "/rows", ""},
		{"GET", "/rows/x", ""},
		{"DELETE", "/rows/x", ""},
		{"POST", "/flush", ""},
		{"POST", "/merge-wal", ""},
		{"GET", "/stats", ""},
	}
	sent := 0
	for _, kind := range []string{"generic", "rollout", "..", "%2e%2e", "generic%2f..", "_registry"} {
		for _, name := range hostileNames {
			if kind != "generic" && name != ".." && name != "%2e%2e" {
				continue // hostile kinds with a few names are enough
			}
			for _, r := range routes {
				target := "/api/v1/stores/" + kind + "/" + name + r.suffix
				code, body := rawRequest(t, addr, r.method, target, secToken, r.body)
				sent++
				if code < 300 || code >= 500 {
					t.Errorf("%s %s: %d %s", r.method, target, code, body)
				}
			}
		}
	}
	// Raw, unescaped dot segments: the server cleans and redirects, never serves them.
	for _, target := range []string{"/api/v1/stores/generic/../../../escape", "/api/v1/stores/../stores/generic/legit/rows", "//api/v1/stores"} {
		code, body := rawRequest(t, addr, "POST", target, secToken, schema)
		sent++
		if code < 300 || code >= 500 || code == http.StatusCreated {
			t.Errorf("POST %s: %d %s", target, code, body)
		}
	}
	// Row ids are keys, never paths: hostile ids on the legitimate store are fine to store,
	// but must not create anything outside the store's prefix either.
	for _, id := range []string{"..%2f..%2f..%2fescape", "%2e%2e", "a%00b"} {
		code, body := rawRequest(t, addr, "DELETE", "/api/v1/stores/generic/legit/rows/"+id, secToken, "")
		sent++
		assert.Less(t, code, 500, "DELETE row %s: %s", id, body)
	}
	code, _ = rawRequest(t, addr, "POST", "/api/v1/stores/generic/legit/flush", secToken, "")
	require.Equal(t, http.StatusOK, code, "flush legit")

	storage := filepath.Join(dir, "storage")
	var outside, foreign []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(storage, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			outside = append(outside, p)
			return nil
		}
		rel = filepath.ToSlash(rel)
		// The store's own objects: its registry entry, its tree and its demand records
		// (docs/FORMAT.md §9).
		if rel != "_registry/generic/legit.json" && !strings.HasPrefix(rel, "generic/legit/") &&
			!strings.HasPrefix(rel, "_demand/generic/legit/") {
			foreign = append(foreign, rel)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, outside, "files outside the storage root")
	assert.Empty(t, foreign, "objects that do not belong to the one legitimate store")
	page, err := w.DB().ListTargets(context.Background(), store.Kinds, store.Target{}, store.MaxListPage)
	require.NoError(t, err)
	stores := page.Stores
	if len(stores) != 1 || stores[0].Target != (store.Target{Kind: store.KindGeneric, Name: "legit"}) {
		t.Errorf("stores after the battery: %+v", page)
	}
	t.Logf("%d hostile requests, no escape, %d stores", sent, len(stores))
}

// TestSecurityTokenGuardsEveryRoute: with a token configured, every route of docs/API.md (and
// unknown ones) answers 401 without it or with a wrong one — before routing, so nothing is
// created, appended, flushed or merged — and the 401 body never echoes the token.
func TestSecurityTokenGuardsEveryRoute(t *testing.T) {
	dir := t.TempDir()
	w := startSecWorker(t, dir)
	addr := w.HTTPAddr()
	reqs := []struct{ method, target, body string }{
		{"POST", "/api/v1/stores/generic/gs", `{"fields":[{"name":"id","type":"string"}]}`},
		{"GET", "/api/v1/stores", ""},
		{"GET", "/api/v1/stores?kind=generic", ""},
		{"POST", "/api/v1/stores/generic/gs/rows", `[{"id":"a"}]`},
		{"GET", "/api/v1/stores/generic/gs/rows/a", ""},
		{"GET", "/api/v1/stores/generic/gs/rows?source=all&limit=5", ""},
		{"DELETE", "/api/v1/stores/generic/gs/rows/a", ""},
		{"POST", "/api/v1/stores/generic/gs/flush", ""},
		{"POST", "/api/v1/stores/generic/gs/merge-wal?wait=true", ""},
		{"GET", "/api/v1/stores/generic/gs/stats", ""},
		{"GET", "/metrics", ""},
		{"GET", "/nope", ""},
		{"PUT", "/api/v1/stores/generic/gs", ""},
		{"POST", "/api/v1/stores/generic/..%2f..%2fx", `{"fields":[{"name":"id","type":"string"}]}`},
	}
	for _, tok := range []string{"", "wrong", secToken + "x", strings.ToUpper(secToken), secToken[:len(secToken)-1]} {
		for _, r := range reqs {
			code, body := rawRequest(t, addr, r.method, r.target, tok, r.body)
			assert.Equal(t, http.StatusUnauthorized, code, "%s %s with token %q: %s", r.method, r.target, tok, body)
			assert.NotContains(t, body, secToken, "401 body echoes the token")
		}
	}
	code, _ := rawRequest(t, addr, "GET", "/healthz", "", "")
	assert.Equal(t, http.StatusOK, code, "/healthz without token")
	page, err := w.DB().ListTargets(context.Background(), store.Kinds, store.Target{}, store.MaxListPage)
	assert.NoError(t, err)
	assert.Empty(t, page.Stores, "unauthenticated requests changed state")
	code, body := rawRequest(t, addr, "POST", "/api/v1/stores/generic/gs", secToken, reqs[0].body)
	assert.Equal(t, http.StatusCreated, code, "with the token: %s", body)
}
