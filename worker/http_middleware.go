package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/store"
)

// This file holds what every request goes through: routing to a JSON 404/405, bearer
// auth, the request log line, JSON error answers and the recovery of a panic.

// reqInfo is filled by handlers for the request log line.
type reqInfo struct {
	target string
	code   string
	err    string
	id     string // request id of a 500, in its answer and its log lines
}

type reqInfoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	if ri, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// statusWriter records the status code.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP: request log + metrics → panic recovery → auth → browser guard → path check →
// routes (JSON 404/405 fallback).
func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ri := &reqInfo{}
	r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
	sw := &statusWriter{ResponseWriter: w}
	route, abort := a.serveRecovering(sw, r)
	status := cmp.Or(sw.status, http.StatusOK)
	d := time.Since(start)
	a.metrics.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	a.metrics.httpSeconds.WithLabelValues(route).Observe(d.Seconds())
	lvl := zapcore.DebugLevel
	switch {
	case status >= 500:
		lvl = zapcore.ErrorLevel
	case status >= 400:
		lvl = zapcore.InfoLevel
	}
	if ce := a.log.Check(lvl, "http request"); ce != nil {
		fields := []zap.Field{zap.String("method", clipText(r.Method)), zap.String("route", route),
			zap.Int("status", status), zap.Duration("duration", d)}
		if ri.target != "" {
			fields = append(fields, zap.String("target", ri.target))
		}
		if ri.code != "" {
			fields = append(fields, zap.String("code", ri.code), zap.String("error", clipText(ri.err)))
		}
		if ri.id != "" {
			fields = append(fields, zap.String("request_id", ri.id))
		}
		ce.Write(fields...)
	}
	if abort {
		panic(http.ErrAbortHandler) // net/http closes the connection without logging
	}
}

// refusal is the answer to r when no route handler may serve it, or nil.
func (a *apiServer) refusal(w http.ResponseWriter, r *http.Request, h http.Handler, pattern string) *apiError {
	if a.cfg.AuthToken != "" && r.URL.Path != "/healthz" && !a.authorized(r) {
		return newAPIError(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token")
	}
	if ae := a.guard.check(r); ae != nil {
		return ae
	}
	noRoute := func() *apiError {
		return newAPIError(http.StatusNotFound, CodeNotFound, "no route for %s %s", clipText(r.Method), clipText(r.URL.Path))
	}
	// The mux would redirect "." and ".." segments to a cleaned path; refuse them instead, so
	// a traversal attempt is a plain 400 that touches nothing. It would redirect an empty
	// segment ("//") too, with a text/html 307 that a client follows to a route it did not
	// name: that path is no route.
	segs := strings.Split(r.URL.EscapedPath(), "/")
	for i, seg := range segs {
		if u, _ := url.PathUnescape(seg); u == "." || u == ".." { // a segment that does not unescape is neither
			return newAPIError(http.StatusBadRequest, CodeInvalidName, "path segment %q is not allowed", clipText(u))
		}
		if seg == "" && i > 0 && i < len(segs)-1 {
			return noRoute()
		}
	}
	if pattern == "" {
		// Not found, method not allowed, a redirect or the mux's empty 400 for a "*" target:
		// let the mux decide whether the path has other methods, then answer in JSON; every
		// answer but a 405 is no route, since a redirect would lead a client elsewhere.
		cw := &statusWriter{ResponseWriter: discardWriter{}}
		h.ServeHTTP(cw, r)
		if cw.status != http.StatusMethodNotAllowed {
			return noRoute()
		}
		w.Header().Set("Allow", cw.Header().Get("Allow"))
		return newAPIError(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
			"%s is not allowed on %s (allowed: %s)", clipText(r.Method), clipText(r.URL.Path), cw.Header().Get("Allow"))
	}
	return checkQuery(r.URL.RawQuery, pattern)
}

// checkQuery refuses a query string that does not parse or names a parameter twice (but
// /metrics' name[]), which the handlers would otherwise answer as a request not sent.
func checkQuery(raw, pattern string) *apiError {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "query string does not parse: %s", clipText(err.Error()))
	}
	for k, vs := range q {
		if len(vs) > 1 && (pattern != metricsPattern || k != metricNamesParam) {
			ae := newAPIError(http.StatusBadRequest, CodeInvalidInput, "query parameter %q is given %d times", clipText(k), len(vs))
			if pattern == metricsPattern {
				ae.Message += "; on /metrics only " + metricNamesParam + " may repeat"
			}
			return ae
		}
	}
	if pattern == metricsPattern {
		return checkMetricsQuery(q)
	}
	return nil
}

// discardWriter swallows the mux's plain-text 404/405 so they can be answered in JSON.
type discardWriter http.Header

func (d discardWriter) Header() http.Header       { return http.Header(d) }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// authorized compares the bearer token in constant time (over digests, so the length of the
// configured token does not leak either).
func (a *apiServer) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	return subtle.ConstantTimeCompare(got[:], a.token[:]) == 1
}

// fail writes err as a JSON error and records it for the request log; a 500 answers a fixed
// text with a request id, since the error may name storage objects, paths or hosts.
func (a *apiServer) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	answer(w, r, ae)
	if ae.Status >= 500 {
		ri := infoFrom(r.Context())
		a.log.Error("request failed", zap.String("method", clipText(r.Method)), zap.String("path", clipText(r.URL.Path)),
			zap.String("target", ri.target), zap.String("code", ae.Code), zap.String("request_id", ri.id), zap.Error(err))
	}
}

// answer writes ae and records it for the request log; a 500 answers a fixed text with an id.
func answer(w http.ResponseWriter, r *http.Request, ae *apiError) {
	ri := infoFrom(r.Context())
	if ae.Status == http.StatusInternalServerError {
		ri.id = newRequestID()
		c := *ae
		c.Message = internalMessage(ae, ri.id)
		ae = &c
		w.Header().Set("X-Request-Id", ri.id)
	}
	ri.code, ri.err = ae.Code, ae.Message
	writeAPIError(w, ae)
}

// internalMessage is a 500's text: what kind of failure, and where its details are.
func internalMessage(ae *apiError, id string) string {
	switch ae.Code {
	case CodeCorrupt:
		return "a stored object does not decode; see the worker log (request id " + id + ")"
	case CodeMergeFailed:
		return "the MergeWal run failed; see the run in Temporal and the worker log (request id " + id + ")"
	}
	return "internal error; see the worker log (request id " + id + ")"
}

// newRequestID is the id of one 500, for its answer and its log lines.
func newRequestID() string {
	return requestIDs.prefix + "-" + strconv.FormatUint(requestIDs.seq.Add(1), 10)
}

// requestIDs numbers the 500s of this process after a random prefix, so ids from several
// workers' logs do not collide.
var requestIDs = struct {
	prefix string
	seq    atomic.Uint64
}{prefix: rand.Text()[:8]}

// writeJSON answers v with status; HTML characters are not escaped (the answer is JSON, never
// HTML), so a '<' in a row costs one byte, not six.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = enc.Encode(map[string]string{"error": "internal error: the answer does not encode as JSON", "code": CodeInternal})
	}
	writeJSONHeader(w, status)
	_, _ = w.Write(buf.Bytes())
}

// writeJSONHeader sends status with the headers of a JSON answer; a HEAD of a list route gets
// these alone, so that it neither renders nor holds a page (Go's server would discard a body).
func writeJSONHeader(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
}

// serveRecovering routes and serves r and answers a panic of either 500 internal in JSON, as
// any failure (the handlers' defers release their budgets as it unwinds); route is the pattern
// served ("unmatched": none), and abort is set when the status was already sent.
func (a *apiServer) serveRecovering(w *statusWriter, r *http.Request) (route string, abort bool) {
	route = "unmatched"
	defer func() {
		if v := recover(); v != nil {
			abort = a.recovered(w, r, route, v)
		}
	}()
	h, pattern := a.mux.Handler(r)
	route = cmp.Or(pattern, "unmatched")
	if ae := a.refusal(w, r, h, pattern); ae != nil {
		a.fail(w, r, ae)
	} else {
		a.mux.ServeHTTP(w, r)
	}
	return route, false
}

// recovered answers, logs and counts the panic v of a request of route, and reports whether
// the connection must be aborted instead (its status is already sent).
func (a *apiServer) recovered(w *statusWriter, r *http.Request, route string, v any) (abort bool) {
	if v == http.ErrAbortHandler { // a handler's own way to drop the connection, not a bug
		return true
	}
	a.metrics.httpPanics.WithLabelValues(route).Inc()
	ri := infoFrom(r.Context())
	abort = w.status != 0
	if abort {
		ri.id = newRequestID()
		ri.code, ri.err = CodeInternal, "the handler panicked after its answer began; connection aborted"
	} else {
		clear(w.Header()) // whatever the handler set was meant for another answer
		answer(w, r, newAPIError(http.StatusInternalServerError, CodeInternal, "handler panicked"))
	}
	stack := zap.Stack("stack")
	if pe, ok := v.(*store.PanicError); ok { // the stack that panicked is the store goroutine's
		stack = zap.ByteString("stack", pe.Stack)
	}
	// The panic's text may hold what the request sent: it is clipped like any echoed text.
	a.log.Error("handler panicked", zap.String("method", clipText(r.Method)), zap.String("route", route),
		zap.String("target", ri.target), zap.String("request_id", ri.id), zap.Bool("aborted", abort),
		zap.String("panic", clipText(fmt.Sprint(v))), stack)
	return abort
}
