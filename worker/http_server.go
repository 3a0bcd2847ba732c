package worker

import (
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"
)

// Who reaches the data plane and for how long: every connection is bounded in time and count,
// so a client that opens connections, or sends a request slowly, holds at most its share of
// the worker, and a browser cannot be turned against a worker that trusts whoever reaches it.

const (
	// maxHeaderBytes bounds a request's line and headers (Go's default is 1 MiB); the server
	// answers 431 above it.
	maxHeaderBytes = 64 << 10
	// readHeaderTimeout bounds reading a request's headers (never more than the read timeout).
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes a kept-alive connection that sends no next request.
	idleTimeout = 2 * time.Minute
)

// newHTTPServer is the server of handler h with cfg's timeouts.
func newHTTPServer(cfg Config, h http.Handler, log *zap.Logger) *http.Server {
	rht := readHeaderTimeout
	if cfg.HTTPReadTimeout > 0 {
		rht = min(rht, cfg.HTTPReadTimeout)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: rht,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log),
	}
}

// limitConnections caps the connections ln hands out at n (0: no cap); connections over the
// cap wait in the listen queue until one closes.
func limitConnections(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, n)
}

// warnIfUnauthenticated sets walkeeper_http_unauthenticated, and warns once, when the data
// plane is reachable beyond this machine (not on loopback) without a bearer token.
func (w *Worker) warnIfUnauthenticated(addr net.Addr) {
	if w.cfg.AuthToken != "" || isLoopback(addr) {
		return // the gauge stays at 0
	}
	w.metrics.httpUnauthenticated.Set(1)
	w.log.Warn("the HTTP data plane listens beyond loopback without --auth-token: whoever reaches the address can read, write and create stores",
		zap.String("listen", addr.String()))
}

// browserGuard keeps a web browser from being turned against a worker that trusts whoever
// reaches it (cross-site request forgery, DNS rebinding): a worker on a loopback address
// answers only loopback Host names (host_not_allowed), and one without a bearer token refuses
// state-changing requests a browser marks as cross-origin (cross_origin). Non-browser clients
// send neither header and name the address they dial, so they pass.
type browserGuard struct {
	hosts  map[string]bool             // allowed Host names (no port); nil: any
	origin *http.CrossOriginProtection // nil: not checked
}

// newBrowserGuard builds the guard of a worker configured to listen on listen, listening on
// addr (the resolved address), with or without a bearer token.
func newBrowserGuard(listen string, addr net.Addr, token bool) browserGuard {
	var g browserGuard
	if !token {
		g.origin = http.NewCrossOriginProtection()
	}
	if !isLoopback(addr) {
		return g
	}
	g.hosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		g.hosts[strings.ToLower(h)] = true
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		g.hosts[ta.IP.String()] = true
	}
	return g
}

// isLoopback reports whether addr is a TCP address on a loopback interface only.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// check returns the 403 r deserves, or nil.
func (g browserGuard) check(r *http.Request) *apiError {
	if g.hosts != nil && r.Host != "" && !g.hosts[hostName(r.Host)] {
		return newAPIError(http.StatusForbidden, CodeHostNotAllowed,
			"Host %q is not a loopback name; this worker listens on loopback and answers only localhost, 127.0.0.1 or [::1]",
			clipText(r.Host))
	}
	if g.origin != nil {
		if err := g.origin.Check(r); err != nil {
			return newAPIError(http.StatusForbidden, CodeCrossOrigin,
				"%s from another origin (Origin %q, Sec-Fetch-Site %q) is refused by a worker without --auth-token",
				clipText(r.Method), clipText(r.Header.Get("Origin")), clipText(r.Header.Get("Sec-Fetch-Site")))
		}
	}
	return nil
}

// hostName is the lower-case host of a Host header, without port or IPv6 brackets.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}
