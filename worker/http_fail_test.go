package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/store"
)

// observedWorker starts an HTTP-only worker whose log is recorded.
func observedWorker(t *testing.T, cfg Config, start MergeStarter) (*Worker, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	return startWorkerLogging(t, cfg, start, zap.New(core)), logs
}

// A 500 answers a fixed text with a request id, never the error's own text; the log has the
// whole error under the same id.
func TestHTTPInternalErrorsDoNotEchoTheError(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:9000: /var/lib/secret/bucket"
	rs := &recStarter{}
	rs.setFail(errors.New(secret))
	w, logs := observedWorker(t, testConfig(t), rs.start)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	r := c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal", "", nil)
	m := expect(t, r, http.StatusInternalServerError, CodeInternal)
	id := r.header.Get("X-Request-Id")
	msg := m["error"].(string)
	if id == "" || msg != "internal error; see the worker log (request id "+id+")" {
		t.Fatalf("500 message %q, X-Request-Id %q", msg, id)
	}
	lines := logs.FilterMessage("request failed").FilterField(zap.String("request_id", id)).All()
	if len(lines) != 1 || !strings.Contains(fmt.Sprint(lines[0].ContextMap()["error"]), secret) {
		t.Fatalf("the log has no line with request id %s and the error: %v", id, logs.All())
	}

	// A failed MergeWal that was waited for: its ids, not its error.
	w.api.triggers.start = startsRun(fakeRun{err: errors.New(secret)})
	r = c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait=true", "", nil)
	m = expect(t, r, http.StatusInternalServerError, CodeMergeFailed)
	if strings.Contains(string(r.body), "secret") || m["workflow_id"] != "merge-wal/generic/gs" || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("merge_failed answer: %s", r.body)
	}
}

// Whatever text of a request an error answer echoes (a query value, the path, ?wait=, the
// Content-Type, the method) is clipped, in the answer and in the request's log line: neither
// grows with what a client sends.
func TestHTTPClipsEchoedText(t *testing.T) {
	w, logs := observedWorker(t, testConfig(t), (&recStarter{}).start)
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	long := strings.Repeat("q", 30<<10)
	for _, tc := range []struct {
		what   string
		r      resp
		status int
		code   string
	}{
		{"?kind=", c.get("/api/v1/stores?kind=" + long), http.StatusBadRequest, CodeUnknownKind},
		{"?limit=", c.get("/api/v1/stores?limit=" + long), http.StatusBadRequest, CodeInvalidInput},
		{"?after=", c.get("/api/v1/stores?after=" + long), http.StatusBadRequest, CodeInvalidInput},
		{"?after= of another kind", c.get("/api/v1/stores?kind=generic&after=rollout:" + long), http.StatusBadRequest, CodeInvalidInput},
		{"rows ?limit=", c.get("/api/v1/stores/generic/gs/rows?limit=" + long), http.StatusBadRequest, CodeInvalidInput},
		{"rows ?source=", c.get("/api/v1/stores/generic/gs/rows?source=" + long), http.StatusBadRequest, CodeInvalidInput},
		{"kind", c.get("/api/v1/stores/" + long + "/gs/rows"), http.StatusBadRequest, CodeUnknownKind},
		{"path", c.get("/" + strings.Repeat("p", 40<<10)), http.StatusNotFound, CodeNotFound},
		{"?wait=", c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait="+long, "", nil), http.StatusBadRequest, CodeInvalidInput},
		{"content type", c.do(http.MethodPost, "/api/v1/stores/generic/gs/rows", "text/"+long, []byte(`[]`)),
			http.StatusUnsupportedMediaType, CodeUnsupportedMediaType},
		{"method", sendWith(t, w, "X"+strings.Repeat("M", 30<<10), "/api/v1/stores/generic/gs/rows", "",
			map[string]string{"Sec-Fetch-Site": "cross-site"}), http.StatusForbidden, CodeCrossOrigin},
	} {
		m := expect(t, tc.r, tc.status, tc.code)
		if msg := m["error"].(string); len(msg) > 2*maxEchoedText || !strings.Contains(msg, "clipped") {
			t.Fatalf("%s: message of %d bytes: %.300s", tc.what, len(msg), msg)
		}
	}
	lines := logs.FilterMessage("http request").All()
	if len(lines) == 0 {
		t.Fatal("no request log line")
	}
	for _, l := range lines {
		for k, v := range l.ContextMap() {
			if s, ok := v.(string); ok && len(s) > 2*maxEchoedText {
				t.Fatalf("log field %s is %d bytes", k, len(s))
			}
		}
	}
	if got := clipText("ab€" + strings.Repeat("c", maxEchoedText)); !strings.HasPrefix(got, "ab€") || !strings.HasSuffix(got, "bytes]") {
		t.Fatalf("clipText = %q", got)
	}
}

// Appends to a store whose WAL this worker's shard cannot replay answer 500 corrupt, and a
// client retrying them costs no writes: the shard is claimed once, not once per request.
func TestHTTPAppendsAgainstADamagedWALClaimOnce(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	opts := store.DefaultOptions()
	opts.InstanceID = cfg.Instance
	crashed, err := store.OpenDB(ctx, cfg.Storage, opts) // never closed: it dies with its WAL unsealed
	if err != nil {
		t.Fatal(err)
	}
	tg := store.Target{Kind: store.KindGeneric, Name: "gs"}
	s, err := crashed.Create(ctx, tg, store.CreateOptions{Schema: &store.Schema{Fields: []store.Field{{Name: "id", Type: store.TypeString}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, []store.Row{{Key: "a", Values: []any{"a"}}}); err != nil {
		t.Fatal(err)
	}
	b := crashed.Bucket()
	shard := "generic/gs/_mem_wal/" + crashed.Shard() + "/"
	wal, err := b.List(ctx, shard+"wal/")
	if err != nil || len(wal) == 0 {
		t.Fatalf("WAL: %v %v", wal, err)
	}
	if err := b.Put(ctx, wal[len(wal)-1].Key, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	manifests := func() int {
		objs, err := b.List(ctx, shard+"manifest/")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	before := manifests()

	w, _ := observedWorker(t, cfg, nil)
	c := newClient(t, w)
	for i := 0; i < 10; i++ {
		expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"b"}]`), http.StatusInternalServerError, CodeCorrupt)
	}
	if n := manifests() - before; n > 1 {
		t.Fatalf("10 refused appends published %d shard manifest versions, want at most 1 (one claim)", n)
	}
}
