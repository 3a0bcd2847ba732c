package worker

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// sendWith sends one request to w with extra headers ("Host" sets the Host header).
func sendWith(t *testing.T, w *Worker, method, path, body string, headers map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+w.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return send(t, nil, req)
}

// Without a token, a browser's state-changing request from another origin is 403
// cross_origin and changes nothing; reads, same-origin requests and clients that send neither
// Origin nor Sec-Fetch-Site (curl) pass.
func TestHTTPRefusesCrossOriginWritesWithoutToken(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	own := "http://" + w.HTTPAddr()
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example"},
		{"Origin": "null"},
		{"Origin": "http://localhost:1"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "Origin": own},
	} {
		expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/x", "", h), http.StatusForbidden, CodeCrossOrigin)
		expect(t, sendWith(t, w, http.MethodDelete, "/api/v1/stores/rollout/x/rows/a", "", h), http.StatusForbidden, CodeCrossOrigin)
	}
	expect(t, sendWith(t, w, http.MethodGet, "/api/v1/stores/rollout/x/stats", "", nil), http.StatusNotFound, CodeStoreNotFound)
	expect(t, sendWith(t, w, http.MethodGet, "/api/v1/stores", "", map[string]string{"Origin": "https://evil.example"}), http.StatusOK, "")

	expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/curl", "", nil), http.StatusCreated, "")
	expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/same", "", map[string]string{"Origin": own}), http.StatusCreated, "")
	expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/nav", "", map[string]string{"Sec-Fetch-Site": "same-origin"}), http.StatusCreated, "")
}

// With a token the browser has no credentials to send, so origins are not checked.
func TestHTTPTokenWorkerDoesNotCheckOrigin(t *testing.T) {
	cfg := testConfig(t)
	cfg.AuthToken = "tok"
	w := startWorker(t, cfg, nil)
	h := map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer tok"}
	expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/x", "", h), http.StatusCreated, "")
	delete(h, "Authorization")
	expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/y", "", h), http.StatusUnauthorized, CodeUnauthorized)
}

// A worker on loopback answers only loopback Host names (DNS rebinding), whatever the port.
func TestHTTPLoopbackWorkerRefusesForeignHosts(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	_, port, _ := net.SplitHostPort(w.HTTPAddr())
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example", "localhost.evil.example:" + port, "10.0.0.1:" + port} {
		for _, path := range []string{"/healthz", "/api/v1/stores"} {
			expect(t, sendWith(t, w, http.MethodGet, path, "", map[string]string{"Host": host}), http.StatusForbidden, CodeHostNotAllowed)
		}
		expect(t, sendWith(t, w, http.MethodPost, "/api/v1/stores/rollout/x", "", map[string]string{"Host": host}), http.StatusForbidden, CodeHostNotAllowed)
	}
	expect(t, sendWith(t, w, http.MethodGet, "/api/v1/stores/rollout/x/stats", "", nil), http.StatusNotFound, CodeStoreNotFound)
	for _, host := range []string{"localhost:" + port, "LOCALHOST", "127.0.0.1:9", "[::1]:" + port, "[::1]", "::1", w.HTTPAddr()} {
		expect(t, sendWith(t, w, http.MethodGet, "/healthz", "", map[string]string{"Host": host}), http.StatusOK, "")
	}
}

// The guard of a worker listening beyond loopback does not check Host (a proxy or a service
// name reaches it); without a token it still refuses cross-origin writes.
func TestBrowserGuardOffLoopback(t *testing.T) {
	g := newBrowserGuard("0.0.0.0:8080", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, false)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/stores", nil)
	req.Host = "walkeeper-0.walkeeper.svc:8080"
	if ae := g.check(req); ae != nil {
		t.Fatalf("non-loopback worker refused Host %q: %v", req.Host, ae)
	}
	req = httptest.NewRequest(http.MethodPost, "/api/v1/stores/rollout/x", nil)
	req.Host = "walkeeper-0.walkeeper.svc:8080"
	req.Header.Set("Origin", "https://evil.example")
	if ae := g.check(req); ae == nil || ae.Code != CodeCrossOrigin {
		t.Fatalf("non-loopback worker without token: cross-origin write = %v", ae)
	}
	g = newBrowserGuard("localhost:8080", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8080}, true)
	for host, ok := range map[string]bool{"127.0.0.2:8080": true, "localhost": true, "127.0.0.3": false} {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.Host = host
		if ae := g.check(req); (ae == nil) != ok {
			t.Errorf("loopback 127.0.0.2: Host %q: %v, want allowed %v", host, ae, ok)
		}
	}
}

// A worker reachable beyond loopback without a token says so once at start and in
// walkeeper_http_unauthenticated; with a token, or on loopback, the gauge is 0.
func TestHTTPUnauthenticatedGauge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token string
		addr  net.Addr
		want  float64
	}{
		{"all interfaces, no token", "", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, 1},
		{"private address, no token", "", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}, 1},
		{"all interfaces, token", "tok", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, 0},
		{"loopback, no token", "", &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.AuthToken = tc.token
			core, logs := observer.New(zapcore.WarnLevel)
			w := newWorker(t, cfg, zap.New(core), nil)
			w.warnIfUnauthenticated(tc.addr)
			if got := testutil.ToFloat64(w.metrics.httpUnauthenticated); got != tc.want {
				t.Fatalf("walkeeper_http_unauthenticated = %v, want %v", got, tc.want)
			}
			if n := logs.Len(); n != int(tc.want) {
				t.Fatalf("%d warnings, want %v: %v", n, tc.want, logs.All())
			}
		})
	}
}
