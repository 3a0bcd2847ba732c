package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

func TestHTTPRoutesHappyPath(t *testing.T) {
	w, c, rs := serveAPI(t, testConfig(t))

	// healthz, create, list stores.
	expect(t, c.get("/healthz"), http.StatusOK, "")
	m := c.postJSON("/api/v1/stores/generic/gs", genericSchema)
	expect(t, m, http.StatusCreated, "")
	if got := m.json(t); got["target"] != "generic:gs" || got["kind"] != "generic" || got["name"] != "gs" {
		t.Fatalf("create response = %s", m.body)
	}
	expect(t, c.do(http.MethodPost, "/api/v1/stores/rollout/ro", "", nil), http.StatusCreated, "")
	list := c.get("/api/v1/stores")
	expect(t, list, http.StatusOK, "")
	stores := list.json(t)["stores"].([]any)
	if len(stores) != 2 {
		t.Fatalf("stores = %s", list.body)
	}
	list = c.get("/api/v1/stores?kind=generic")
	stores = list.json(t)["stores"].([]any)
	if len(stores) != 1 || stores[0].(map[string]any)["target"] != "generic:gs" {
		t.Fatalf("stores?kind=generic = %s", list.body)
	}

	// append and get rows (TestListRowsLimit pages through them).
	r := c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a","n":1,"s":"x"},{"id":"b","n":2},{"id":"c"}]`)
	expect(t, r, http.StatusOK, "")
	if r.json(t)["appended"] != float64(3) {
		t.Fatalf("append = %s", r.body)
	}
	r = c.get("/api/v1/stores/generic/gs/rows/a")
	expect(t, r, http.StatusOK, "")
	if row := r.json(t); row["id"] != "a" || row["n"] != float64(1) || row["s"] != "x" {
		t.Fatalf("get = %s", r.body)
	}
	// delete is a tombstone.
	expect(t, c.do(http.MethodDelete, "/api/v1/stores/generic/gs/rows/b", "", nil), http.StatusOK, "")
	expect(t, c.get("/api/v1/stores/generic/gs/rows/b"), http.StatusNotFound, CodeRowNotFound)

	// flush seals a generation; a second flush seals nothing.
	r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/flush", "", nil)
	expect(t, r, http.StatusOK, "")
	f := r.json(t)
	if f["sealed"] != true || f["generation"] == nil || f["pending"] != float64(1) {
		t.Fatalf("flush = %s", r.body)
	}
	r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/flush", "", nil)
	if f := r.json(t); f["sealed"] != false || f["generation"] != nil {
		t.Fatalf("second flush = %s", r.body)
	}
	r = c.get("/api/v1/stores/generic/gs/rows?source=wal")
	if rows := r.json(t)["rows"].([]any); len(rows) != 2 {
		t.Fatalf("wal rows = %s", r.body)
	}
	r = c.get("/api/v1/stores/generic/gs/rows?source=base")
	if rows := r.json(t)["rows"].([]any); len(rows) != 0 {
		t.Fatalf("base rows before any merge = %s", r.body)
	}

	// stats.
	r = c.get("/api/v1/stores/generic/gs/stats")
	expect(t, r, http.StatusOK, "")
	st := r.json(t)
	if st["target"] != "generic:gs" {
		t.Fatalf("stats = %s", r.body)
	}
	for _, k := range []string{"base_version", "runs", "rows", "shards"} {
		if _, ok := st[k]; !ok {
			t.Fatalf("stats lacks %q: %s", k, r.body)
		}
	}
	shards := st["shards"].([]any)
	if len(shards) != 1 {
		t.Fatalf("stats shards = %s", r.body)
	}
	sh := shards[0].(map[string]any)
	if sh["shard"] != w.DB().Shard() || sh["pending_generations"] != float64(1) {
		t.Fatalf("stats shard = %s", r.body)
	}
	for _, k := range []string{"pending_bytes", "watermark"} {
		if _, ok := sh[k]; !ok {
			t.Fatalf("stats shard lacks %q: %s", k, r.body)
		}
	}

	// merge-wal: 202 with ids; with wait, 200 with the result.
	r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal", "", nil)
	expect(t, r, http.StatusAccepted, "")
	mw := r.json(t)
	if mw["workflow_id"] != "merge-wal/generic/gs" || mw["run_id"] != "run-1" {
		t.Fatalf("merge-wal = %s", r.body)
	}
	r = c.postJSON("/api/v1/stores/generic/gs/merge-wal?wait=true", `{"max_generations":2}`)
	expect(t, r, http.StatusOK, "")
	mw = r.json(t)
	res, _ := mw["result"].(map[string]any)
	if mw["workflow_id"] != "merge-wal/generic/gs" || res == nil {
		t.Fatalf("merge-wal?wait = %s", r.body)
	}
	if rs.count() != 2 || rs.calls[1].in.MaxGenerations == nil || *rs.calls[1].in.MaxGenerations != 2 ||
		rs.calls[1].in.Target != "generic:gs" {
		t.Fatalf("starter calls = %+v", rs.calls)
	}

	// metrics.
	r = c.get("/metrics")
	expect(t, r, http.StatusOK, "")
	for _, name := range []string{"walkeeper_http_requests_total", "walkeeper_flush_total", "walkeeper_trigger_starts_total",
		"walkeeper_append_rows_total", "go_goroutines", `route="POST /api/v1/stores/{kind}/{name}/rows"`} {
		if !strings.Contains(string(r.body), name) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}
}

func TestHTTPCreateConflicts(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusConflict, CodeAlreadyExists)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", `{"fields":[{"name":"id","type":"string"}]}`),
		http.StatusConflict, CodeSchemaMismatch)
	expect(t, c.do(http.MethodPost, "/api/v1/stores/rollout/r", "", nil), http.StatusCreated, "")
	expect(t, c.do(http.MethodPost, "/api/v1/stores/rollout/r", "", nil), http.StatusConflict, CodeAlreadyExists)
}

func TestHTTPBadInputWritesNothing(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBodyBytes = 4 << 10
	cfg.MaxRowBytes = 512
	w := startWorker(t, cfg, nil)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	const rows = "/api/v1/stores/generic/gs/rows"
	good := `{"id":"ok","n":1}`
	big := `[` + strings.Repeat(good+",", 400) + good + `]`

	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"unknown kind", "POST", "/api/v1/stores/bogus/gs/rows", "application/json", `[` + good + `]`, 400, CodeUnknownKind},
		{"unknown store", "POST", "/api/v1/stores/generic/nope/rows", "application/json", `[` + good + `]`, 404, CodeStoreNotFound},
		{"dotdot segment", "POST", "/api/v1/stores/generic/../rows", "application/json", `[` + good + `]`, 400, CodeInvalidName},
		{"escaped dotdot", "POST", "/api/v1/stores/generic/%2E%2E/rows", "application/json", `[` + good + `]`, 400, CodeInvalidName},
		{"escaped slash", "POST", "/api/v1/stores/generic/a%2Fb/rows", "application/json", `[` + good + `]`, 400, CodeInvalidName},
		{"colon", "POST", "/api/v1/stores/generic/a:b/rows", "application/json", `[` + good + `]`, 400, CodeInvalidName},
		{"reserved name", "POST", "/api/v1/stores/generic/_registry/rows", "application/json", `[` + good + `]`, 400, CodeInvalidName},
		{"invalid json", "POST", rows, "application/json", `[{"id":`, 400, CodeInvalidJSON},
		{"empty body", "POST", rows, "application/json", ``, 400, CodeInvalidJSON},
		{"text/plain", "POST", rows, "text/plain", `[` + good + `]`, 415, CodeUnsupportedMediaType},
		{"no content type", "POST", rows, "", `[` + good + `]`, 415, CodeUnsupportedMediaType},
		{"form", "POST", rows, "application/x-www-form-urlencoded", `a=b`, 415, CodeUnsupportedMediaType},
		{"too large", "POST", rows, "application/json", big, 413, CodeBodyTooLarge},
		{"row too large", "POST", rows, "application/json", `[{"id":"x","s":"` + strings.Repeat("y", 600) + `"}]`, 400, CodeInvalidInput},
		{"not an array", "POST", rows, "application/json", good, 400, CodeInvalidInput},
		{"wrong type", "POST", rows, "application/json", `[{"id":"a","n":"one"}]`, 400, CodeInvalidInput},
		{"float for int", "POST", rows, "application/json", `[{"id":"a","n":1.5}]`, 400, CodeInvalidInput},
		{"key wrong type", "POST", rows, "application/json", `[{"id":7}]`, 400, CodeInvalidInput},
		{"null key", "POST", rows, "application/json", `[{"id":null}]`, 400, CodeInvalidInput},
		{"missing key", "POST", rows, "application/json", `[{"n":1}]`, 400, CodeInvalidInput},
		{"duplicate field", "POST", rows, "application/json", `[{"id":"a","id":"b"}]`, 400, CodeInvalidInput},
		{"unknown field", "POST", rows, "application/json", `[{"id":"a","zzz":1}]`, 400, CodeInvalidInput},
		{"one bad row among good", "POST", rows, "application/json", `[` + good + `,{"id":"b","n":"x"}]`, 400, CodeInvalidInput},
		{"create bad kind", "POST", "/api/v1/stores/bogus/x", "application/json", genericSchema, 400, CodeUnknownKind},
		{"create bad name", "POST", "/api/v1/stores/generic/a%2Fb", "application/json", genericSchema, 400, CodeInvalidName},
		{"create no schema", "POST", "/api/v1/stores/generic/x", "application/json", `{}`, 400, CodeInvalidInput},
		{"create bad type", "POST", "/api/v1/stores/generic/x", "application/json", `{"fields":[{"name":"id","type":"uuid"}]}`, 400, CodeInvalidInput},
		{"create duplicate member", "POST", "/api/v1/stores/generic/x", "application/json", `{"fields":[{"name":"id","type":"string"}],"fields":[]}`, 400, CodeInvalidInput},
		{"create unknown member", "POST", "/api/v1/stores/generic/x", "application/json", `{"fields":[{"name":"id","type":"string"}],"extra":1}`, 400, CodeInvalidInput},
		{"create duplicate field", "POST", "/api/v1/stores/generic/x", "application/json", `{"fields":[{"name":"id","type":"string"},{"name":"id","type":"string"}]}`, 400, CodeInvalidInput},
		{"create text/plain", "POST", "/api/v1/stores/generic/x", "text/plain", genericSchema, 415, CodeUnsupportedMediaType},
		{"delete key not UTF-8", "DELETE", rows + "/a%FFb", "", "", 400, CodeInvalidInput},
		{"list bad kind", "GET", "/api/v1/stores?kind=bogus", "", "", 400, CodeUnknownKind},
		{"list bad source", "GET", rows + "?source=disk", "", "", 400, CodeInvalidInput},
		{"list bad limit", "GET", rows + "?limit=-1", "", "", 400, CodeInvalidInput},
		{"merge bad wait", "POST", "/api/v1/stores/generic/gs/merge-wal?wait=perhaps", "", "", 400, CodeInvalidInput},
		{"merge without temporal", "POST", "/api/v1/stores/generic/gs/merge-wal", "", "", 503, CodeTemporalUnavailable},
		{"merge with empty form body", "POST", "/api/v1/stores/generic/gs/merge-wal", "application/x-www-form-urlencoded", "", 503, CodeTemporalUnavailable},
		{"merge with a form body", "POST", "/api/v1/stores/generic/gs/merge-wal", "application/x-www-form-urlencoded", "a=b", 415, CodeUnsupportedMediaType},
		{"no route", "GET", "/api/v2/stores", "", "", 404, CodeNotFound},
		{"wrong method", "PUT", rows, "application/json", `[]`, 405, CodeMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := c.do(tc.method, tc.path, tc.ctype, body)
			expect(t, r, tc.status, tc.code)
		})
	}

	// Chunked body over the limit (no Content-Length): MaxBytesReader path.
	t.Run("too large chunked", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(big))
			_ = pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, c.base+rows, pr)
		req.Header.Set("Content-Type", "application/json")
		expect(t, send(t, nil, req), 413, CodeBodyTooLarge)
	})

	// An empty chunked body (no Content-Length) is an empty body too, whatever its type.
	t.Run("merge with empty chunked body", func(t *testing.T) {
		for _, ctype := range []string{"", "text/plain"} {
			pr, pw := io.Pipe()
			_ = pw.Close()
			req, _ := http.NewRequest(http.MethodPost, c.base+"/api/v1/stores/generic/gs/merge-wal", pr)
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			expect(t, send(t, nil, req), 503, CodeTemporalUnavailable)
		}
	})

	// Nothing was written anywhere.
	r := c.get(rows)
	expect(t, r, http.StatusOK, "")
	if got := r.json(t)["rows"].([]any); len(got) != 0 {
		t.Fatalf("bad input wrote rows: %s", r.body)
	}
	r = c.get("/api/v1/stores")
	if got := r.json(t)["stores"].([]any); len(got) != 1 {
		t.Fatalf("bad input created stores: %s", r.body)
	}
	res, err := w.DB().Open(context.Background(), store.Target{Kind: store.KindGeneric, Name: "gs"})
	if err != nil {
		t.Fatal(err)
	}
	if fr, err := res.Flush(context.Background()); err != nil || fr.Sealed {
		t.Fatalf("bad input left something to seal: %+v %v", fr, err)
	}
}

func TestHTTPAuth(t *testing.T) {
	cfg := testConfig(t)
	cfg.AuthToken = "s3cret-token"
	w := startWorker(t, cfg, nil)
	c := newClient(t, w)

	expect(t, c.get("/healthz"), http.StatusOK, "")
	r := c.get("/api/v1/stores")
	expect(t, r, http.StatusUnauthorized, CodeUnauthorized)
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	expect(t, c.get("/metrics"), http.StatusUnauthorized, CodeUnauthorized)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusUnauthorized, CodeUnauthorized)
	c.token = "s3cret-tokeN"
	expect(t, c.get("/api/v1/stores"), http.StatusUnauthorized, CodeUnauthorized)
	c.token = "s3cret"
	expect(t, c.get("/api/v1/stores"), http.StatusUnauthorized, CodeUnauthorized)

	c.token = "s3cret-token"
	expect(t, c.get("/api/v1/stores"), http.StatusOK, "")
	expect(t, c.get("/metrics"), http.StatusOK, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	// Scheme is case-insensitive.
	expect(t, sendWith(t, w, http.MethodGet, "/api/v1/stores", "", map[string]string{"Authorization": "bearer s3cret-token"}), http.StatusOK, "")
}

// Appends and deletes are writes: a shard at --pending-max refuses them, writes nothing of
// them, and, since refused writers produce no seals, asks Temporal for a merge itself.
func TestHTTPWritesRefusedOverPendingLimit(t *testing.T) {
	const rows = "/api/v1/stores/generic/gs/rows"
	for _, tc := range []struct {
		name       string
		pendingMax int
		write      func(c *apiClient) resp
		row        string // read after the refusal: the write left it as it was
		rowStatus  int
		rowCode    string
	}{
		{"append", 2, func(c *apiClient) resp { return c.postJSON(rows, `[{"id":"late"}]`) }, "late", http.StatusNotFound, CodeRowNotFound},
		{"delete", 1, func(c *apiClient) resp { return c.do(http.MethodDelete, rows+"/r0", "", nil) }, "r0", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PendingWarn = 0
			cfg.PendingMax, cfg.MergeAfterGenerations = tc.pendingMax, 0
			_, c, rs := serveAPI(t, cfg)
			expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
			for i := range tc.pendingMax {
				c.sealGS(t, fmt.Sprintf(`[{"id":"r%d"}]`, i))
			}
			r := tc.write(c)
			expect(t, r, http.StatusServiceUnavailable, CodeTooManyPending)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 too_many_pending without Retry-After")
			}
			waitUntil(t, "debt merge start", func() bool { return rs.count() > 0 })
			if n := rs.count(); n != 1 {
				t.Fatalf("debt merge starts = %d, want 1", n)
			}
			expect(t, c.get(rows+"/"+tc.row), tc.rowStatus, tc.rowCode)
		})
	}
}

func TestHTTPFlushRunsCountTrigger(t *testing.T) {
	cfg := testConfig(t)
	cfg.MergeAfterGenerations = 2
	w, c, rs := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	for i := range 2 {
		c.sealGS(t, fmt.Sprintf(`[{"id":"r%d"}]`, i))
		w.flusher.triggers.wg.Wait() // starts run in the background
		if want := i; rs.count() != want {
			t.Fatalf("after flush %d: starts = %d, want %d", i+1, rs.count(), want)
		}
	}
	// A failing start never fails the flush.
	rs.setFail(errors.New("temporal down"))
	c.sealGS(t, `[{"id":"r9"}]`)
}

func TestHTTPMergeWalErrors(t *testing.T) {
	w, c, rs := serveAPI(t, testConfig(t))
	expect(t, c.do(http.MethodPost, "/api/v1/stores/generic/none/merge-wal", "", nil), http.StatusNotFound, CodeStoreNotFound)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/merge-wal", `{"bogus":1}`), http.StatusBadRequest, CodeInvalidInput)
	expect(t, c.postJSON("/api/v1/stores/generic/gs/merge-wal", `{"max_bytes":-1}`), http.StatusBadRequest, CodeInvalidInput)
	// Knobs past MergeWal's bounds are the client's mistake: refused before any start, and
	// not counted as a failed start (which alerts that Temporal is unreachable).
	for body, said := range map[string]string{
		`{"max_passes":10001}`:       "invalid input: max_passes: 10001 is above the ceiling 10000",
		`{"max_bytes":1}`:            "max_bytes: 1 is below the floor",
		`{"max_generations":100001}`: "max_generations: 100001 is above the ceiling",
	} {
		m := expect(t, c.postJSON("/api/v1/stores/generic/gs/merge-wal", body), http.StatusBadRequest, CodeInvalidInput)
		if !strings.Contains(fmt.Sprint(m["error"]), said) {
			t.Fatalf("%s: answer %v does not say %q", body, m["error"], said)
		}
	}
	if rs.count() != 0 {
		t.Fatalf("bad merge requests started %d workflows", rs.count())
	}
	if n := testutil.ToFloat64(w.api.metrics.triggerStarts.WithLabelValues(TriggerHTTP, ResultFailed)); n != 0 {
		t.Fatalf("bad merge requests counted %v failed starts", n)
	}
	rs.setFail(serviceerror.NewUnavailable("frontend down"))
	r := c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal", "", nil)
	expect(t, r, http.StatusServiceUnavailable, CodeTemporalUnavailable)
	rs.setFail(fmt.Errorf("workflow ID merge-wal/generic/gs is held by a running Foo workflow: %w", contract.ErrWorkflowIDTaken))
	r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal", "", nil)
	if m := expect(t, r, http.StatusConflict, CodeWorkflowIDTaken); !strings.Contains(fmt.Sprint(m["error"]), "Foo") {
		t.Fatalf("workflow_id_taken does not name the holder: %s", r.body)
	}
	// A namespace missing a walkeeper search attribute: the operator's to fix, named, not a bug.
	for _, refusal := range []error{
		serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute WalTrigger"),
		serviceerror.NewPermissionDenied("Request unauthorized.", ""),
	} {
		rs.setFail(refusal)
		r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal", "", nil)
		if m := expect(t, r, http.StatusServiceUnavailable, CodeTemporalMisconfig); !strings.Contains(fmt.Sprint(m["error"]), refusal.Error()) {
			t.Fatalf("temporal_misconfigured does not name the cause: %s", r.body)
		}
		if r.header.Get("Retry-After") != "" {
			t.Fatalf("temporal_misconfigured advertises a retry: %s", r.header.Get("Retry-After"))
		}
	}
	rs.setFail(nil)

	// How a waited-for run ended: failed; cancelled in Temporal Web or terminated (a reset
	// terminates the run it replaces), a conflict that says so; ended by Temporal at its run
	// timeout, a timeout that says so. An activity's timeout or cancel that failed the run is
	// a failure of the run, not how the run ended. Every answer carries the run's ids.
	wrapped := func(err error) error { return fmt.Errorf("workflow execution error: %w", err) }
	for _, tc := range []struct {
		err    error
		status int
		code   string
		said   string
	}{
		{errors.New("activity failed"), http.StatusInternalServerError, CodeMergeFailed, ""},
		{wrapped(temporal.NewCanceledError()), http.StatusConflict, CodeMergeStopped, "was cancelled"},
		{wrapped(&temporal.TerminatedError{}), http.StatusConflict, CodeMergeStopped, "was terminated"},
		{wrapped(temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)), http.StatusGatewayTimeout, CodeMergeTimedOut, "run timeout"},
		{wrapped(&temporal.ActivityError{}), http.StatusInternalServerError, CodeMergeFailed, ""},
		{wrapped(fmt.Errorf("%w: %w", &temporal.ActivityError{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil))),
			http.StatusInternalServerError, CodeMergeFailed, ""},
		{wrapped(fmt.Errorf("%w: %w", &temporal.ActivityError{}, temporal.NewCanceledError())), http.StatusInternalServerError, CodeMergeFailed, ""},
	} {
		w.api.triggers.start = startsRun(fakeRun{err: tc.err})
		r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait=1", "", nil)
		m := expect(t, r, tc.status, tc.code)
		if m["workflow_id"] != "merge-wal/generic/gs" || !strings.Contains(fmt.Sprint(m["error"]), tc.said) {
			t.Fatalf("%v: %s answer without its ids or %q: %s", tc.err, tc.code, tc.said, r.body)
		}
	}
}

func TestHTTPServerAnswersOnlyJSON(t *testing.T) {
	// Unknown routes and methods answer JSON with a code, never text/plain.
	w := startWorker(t, testConfig(t), nil)
	c := newClient(t, w)
	r := c.do(http.MethodDelete, "/api/v1/stores", "", nil)
	expect(t, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
	if !strings.Contains(r.header.Get("Allow"), "GET") {
		t.Fatalf("Allow = %q", r.header.Get("Allow"))
	}
	expect(t, c.get("/"), http.StatusNotFound, CodeNotFound)
	expect(t, c.get("/api/v1/stores/generic/gs/rows/x/y"), http.StatusNotFound, CodeNotFound)
	// A path the mux would clean (an empty segment) is no route either, not a text/html
	// redirect that a client follows to another route, a POST turned into a GET.
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1//stores"},
		{http.MethodPost, "/api/v1/stores/generic//gs/flush"},
		{http.MethodGet, "//healthz"},
	} {
		req, _ := http.NewRequest(tc.method, c.base+tc.path, nil)
		expect(t, send(t, noRedirects, req), http.StatusNotFound, CodeNotFound)
	}
}

func TestHTTPListenDefaultIsLoopback(t *testing.T) {
	host, _, err := net.SplitHostPort(DefaultConfig().Listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("default listen %q is not loopback", DefaultConfig().Listen)
	}
}

func TestClassifyMapsEveryStoreMark(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("x: %w", store.ErrInvalidInput), 400, CodeInvalidInput},
		{fmt.Errorf("x: %w", store.ErrKeyTooLong), 400, CodeKeyTooLong},
		{fmt.Errorf("x: %w", store.ErrAppendTooLarge), 413, CodeAppendTooLarge},
		{fmt.Errorf("x: %w", store.ErrNotFound), 404, CodeNotFound},
		{fmt.Errorf("x: %w", store.ErrAlreadyExists), 409, CodeAlreadyExists},
		{fmt.Errorf("x: %w", store.ErrTooManyPending), 503, CodeTooManyPending},
		{fmt.Errorf("x: %w", store.ErrConflict), 409, CodeConflict},
		{fmt.Errorf("x: %w", store.ErrStalePreparation), 409, CodeConflict},
		{fmt.Errorf("x: %w", store.ErrCorrupt), 500, CodeCorrupt},
		{fmt.Errorf("x: %w", store.ErrFenced), 503, CodeFenced},
		{fmt.Errorf("x: %w", store.ErrBudgetBusy), 503, CodeBudgetBusy},
		{fmt.Errorf("x: %w", store.ErrClosed), 503, CodeShuttingDown},
		{context.Canceled, StatusClientClosedRequest, CodeCanceled},
		{context.DeadlineExceeded, 504, CodeTimeout},
		// A storage request that made no progress for the stall timeout may succeed when retried.
		{fmt.Errorf("seal: %w", store.ErrStalled), 504, CodeTimeout},
		{&http.MaxBytesError{Limit: 1}, 413, CodeBodyTooLarge},
		{errors.New("boom"), 500, CodeInternal},
	}
	for _, tc := range cases {
		ae := classify(tc.err)
		if ae.Status != tc.status || ae.Code != tc.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", tc.err, ae.Status, ae.Code, tc.status, tc.code)
		}
	}
	if ae := notFoundAs(fmt.Errorf("x: %w", store.ErrNotFound), CodeRowNotFound); ae.Code != CodeRowNotFound || ae.Status != 404 {
		t.Errorf("notFoundAs = %+v", ae)
	}
	if ae := notFoundAs(fmt.Errorf("x: %w", store.ErrInvalidInput), CodeRowNotFound); ae.Code != CodeInvalidInput {
		t.Errorf("notFoundAs changed a non-404: %+v", ae)
	}
}

// A query string that does not parse (a bad escape, a ';') or repeats a parameter is refused:
// Go's parser dropped the bad pair and kept the first of a repeated one, so ?after=%zz listed
// the first page again and ?limit=1&limit=5000 took whichever came first.
func TestHTTPRefusesQueriesThatDoNotParseOrRepeat(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	for _, path := range []string{
		"/api/v1/stores?after=%zz",
		"/api/v1/stores?limit=1&limit=1000",
		"/api/v1/stores?kind=generic;kind=rollout",
		"/api/v1/stores/generic/gs/rows?after=%zz",
		"/api/v1/stores/generic/gs/rows?source=wal&source=base",
		"/api/v1/stores/generic/gs/stats?x=1&x=2",
		"/healthz?a=%",
	} {
		r := c.get(path)
		expect(t, r, http.StatusBadRequest, CodeInvalidInput)
	}
	expect(t, c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait=true&wait=false", "", nil), http.StatusBadRequest, CodeInvalidInput)
	expect(t, c.get("/api/v1/stores?limit=1&after="), http.StatusOK, "")
}
