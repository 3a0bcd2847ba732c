package worker

import (
	"net"
	"net/http"
	"strings"
)

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
