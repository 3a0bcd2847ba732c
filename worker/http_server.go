package worker

import (
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"
)

// The data plane's http.Server: every connection is bounded in time and count, so a client
// that opens connections, or sends a request slowly, holds at most its share of the worker.

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
	open := w.cfg.AuthToken == "" && !isLoopback(addr)
	if !open {
		w.metrics.httpUnauthenticated.Set(0)
		return
	}
	w.metrics.httpUnauthenticated.Set(1)
	w.log.Warn("the HTTP data plane listens beyond loopback without --auth-token: whoever reaches the address can read, write and create stores",
		zap.String("listen", addr.String()))
}
