package worker

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A handler's panic is answered 500 internal in JSON with a request id, logged once with its
// route and counted, and the connection serves the next request; net/http neither drops the
// connection nor prints the stack.
func TestHTTPPanicIsAnswered500Internal(t *testing.T) {
	w, logs := observedWorker(t, testConfig(t), nil)
	const route = "GET /test/panic"
	w.api.mux.HandleFunc(route, func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Retry-After", "7") // meant for an answer the panic replaces
		panic("boom: a row the client sent")
	})
	c := newClient(t, w)
	r := c.get("/test/panic")
	m := expect(t, r, http.StatusInternalServerError, CodeInternal)
	id := r.header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	require.Equal(t, "internal error; see the worker log (request id "+id+")", m["error"])
	require.Empty(t, r.header.Get("Retry-After"))
	require.NotContains(t, string(r.body), "boom")

	lines := logs.FilterMessage("handler panicked").All()
	require.Len(t, lines, 1)
	f := lines[0].ContextMap()
	require.Equal(t, route, f["route"])
	require.Equal(t, id, f["request_id"])
	require.Contains(t, f["panic"], "boom")
	require.Contains(t, f["stack"], "TestHTTPPanicIsAnswered500Internal")
	require.Empty(t, logs.FilterMessageSnippet("panic serving").All(), "net/http logged the panic too")
	require.Equal(t, 1.0, testutil.ToFloat64(w.api.metrics.httpPanics.WithLabelValues(route)))
	require.Equal(t, 1.0, testutil.ToFloat64(w.api.metrics.httpRequests.WithLabelValues(route, "500")))

	expect(t, c.get("/healthz"), http.StatusOK, "")
}

// panicReader is a request body whose Read panics.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("body reader panicked") }

// A panic while a request body is read, with its bytes taken from --body-budget-bytes, gives
// the bytes back: a reservation leaked per panic would lock every body out in the end.
func TestHTTPPanicReleasesTheBodyBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBodyBytes, cfg.BodyBudgetBytes = 1024, 1024
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")

	for _, length := range []int64{1024, -1} { // a known length, and a chunked body
		req := httptest.NewRequest(http.MethodPost, "/api/v1/stores/generic/gs/rows", io.NopCloser(panicReader{}))
		req.Host, req.ContentLength = "127.0.0.1", length
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		w.api.ServeHTTP(rec, req)
		require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
		require.Contains(t, rec.Body.String(), `"code":"internal"`)
		require.True(t, w.api.bodies.free(cfg.BodyBudgetBytes), "the panicked request kept its body's bytes")
	}
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"}]`), http.StatusOK, "")
}

// recoveredFrom is what f panics with (nil: it returns).
func recoveredFrom(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// panicWriter is an answer whose body Write panics once the status is sent.
type panicWriter struct {
	header http.Header
	status int
}

func (p *panicWriter) Header() http.Header       { return p.header }
func (p *panicWriter) WriteHeader(code int)      { p.status = code }
func (p *panicWriter) Write([]byte) (int, error) { panic("answer writer panicked") }

// A panic after a list page's status was sent cannot be answered: the request aborts the
// connection (http.ErrAbortHandler, which net/http drops silently) instead of writing a second
// status into the page, and the page's bytes go back to --page-budget-bytes.
func TestHTTPPanicAfterTheStatusAbortsAndReleasesThePageBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.PageBytes, cfg.MaxRowBytes = 1024, 1024
	cfg.PageBudgetBytes = cfg.PageBytes + int64(cfg.MaxRowBytes)
	w, logs := observedWorker(t, cfg, nil)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"}]`), http.StatusOK, "")

	req := httptest.NewRequest(http.MethodGet, "/api/v1/stores/generic/gs/rows", nil)
	req.Host = "127.0.0.1"
	pw := &panicWriter{header: http.Header{}}
	require.Equal(t, http.ErrAbortHandler, recoveredFrom(func() { w.api.ServeHTTP(pw, req) }))
	require.Equal(t, http.StatusOK, pw.status, "one status, the page's")
	require.True(t, w.api.pages.free(cfg.PageBudgetBytes), "the panicked page kept its bytes")

	const route = "GET /api/v1/stores/{kind}/{name}/rows"
	require.Equal(t, 1.0, testutil.ToFloat64(w.api.metrics.httpPanics.WithLabelValues(route)))
	lines := logs.FilterMessage("handler panicked").All()
	require.Len(t, lines, 1)
	require.Equal(t, true, lines[0].ContextMap()["aborted"])
	require.Equal(t, "generic:gs", lines[0].ContextMap()["target"])

	// A handler's own http.ErrAbortHandler is passed on as it is, and is no panic to count.
	w.api.mux.HandleFunc("GET /test/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	req = httptest.NewRequest(http.MethodGet, "/test/abort", bytes.NewReader(nil))
	req.Host = "127.0.0.1"
	require.Equal(t, http.ErrAbortHandler, recoveredFrom(func() { w.api.ServeHTTP(httptest.NewRecorder(), req) }))
	require.Equal(t, 0.0, testutil.ToFloat64(w.api.metrics.httpPanics.WithLabelValues("GET /test/abort")))
	require.Len(t, logs.FilterMessage("handler panicked").All(), 1)
}
