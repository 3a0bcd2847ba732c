package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
)

// Fuzz targets for the HTTP decoders, because clients are not trusted: whatever a client sends, the data plane
// answers with a JSON error and a status below 500 — never a panic, never a 5xx — except the
// documented 503s that are not about the input (no Temporal for merge-wal, debt limits).
// Run one for a minute with e.g.
//
//	go test -run '^$' -fuzz '^FuzzHTTPAppendRows$' -fuzztime 1m ./worker/
//
// Seeds live in testdata/fuzz/<Name>/; docs/benchmarks/reliability-runs.md records the runs.

var fuzzSeq atomic.Int64

// fuzzServer starts an HTTP-only worker on a fresh mem:// root with one store of each kind
// named "fz" (the generic one has every field type) and returns its handler. Requests go
// straight to the handler (httptest), not through a socket.
func fuzzServer(f *testing.F) http.Handler {
	f.Helper()
	cfg := testConfig(f)
	cfg.Storage = fmt.Sprintf("mem://worker-fuzz-%d-%d", os.Getpid(), fuzzSeq.Add(1))
	h := startWorkerLogging(f, cfg, nil, zap.NewNop()).Handler()
	for _, c := range []struct{ kind, body string }{
		{"generic", fuzzGenericSchema},
		{"rollout", ""},
		{"datagen", ""},
	} {
		rec := fuzzDo(h, http.MethodPost, "/api/v1/stores/"+c.kind+"/fz", "", []byte(c.body))
		if rec.Code != http.StatusCreated {
			f.Fatalf("create %s: %d %s", c.kind, rec.Code, rec.Body)
		}
	}
	return h
}

const fuzzGenericSchema = `{"fields":[{"name":"id","type":"string"},{"name":"i","type":"int64","nullable":true},` +
	`{"name":"f","type":"float64","nullable":true},{"name":"b","type":"bool","nullable":true},` +
	`{"name":"bin","type":"binary","nullable":true},{"name":"ts","type":"timestamp","nullable":true}]}`

func fuzzDo(h http.Handler, method, path, rawQuery string, body []byte) *httptest.ResponseRecorder {
	req := &http.Request{
		Method:     method,
		URL:        &url.URL{Path: path, RawQuery: rawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{},
		Host:          "127.0.0.1",
		RemoteAddr:    "127.0.0.1:1234",
		RequestURI:    (&url.URL{Path: path, RawQuery: rawQuery}).RequestURI(),
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	req = req.WithContext(context.Background())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails on a 5xx that is about the input, on a non-JSON error body, and on an
// error without a code.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		var e struct{ Code string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		switch e.Code {
		case CodeTemporalUnavailable, CodeTooManyPending:
			return // documented 503s that do not depend on the request body
		}
		t.Fatalf("%s: status %d (%s): %s", what, rec.Code, e.Code, rec.Body.String())
	}
	if rec.Code >= 400 && rec.Code != http.StatusMethodNotAllowed || rec.Code == http.StatusMethodNotAllowed && rec.Body.Len() > 0 {
		var e struct{ Error, Code string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Error == "" {
			t.Fatalf("%s: status %d without a JSON error {error, code}: %q", what, rec.Code, rec.Body.String())
		}
	}
}

var fuzzKinds = []string{"generic", "rollout", "datagen", "bogus"}

// FuzzHTTPAppendRows: POST /api/v1/stores/{kind}/fz/rows with any body.
func FuzzHTTPAppendRows(f *testing.F) {
	h := fuzzServer(f)
	f.Add(uint8(0), []byte(`[{"id":"a","i":1,"f":1.5,"b":true,"bin":"aGk=","ts":"2024-01-02T03:04:05Z"}]`))
	f.Add(uint8(0), []byte(`[{"id":"a","i":1.5}]`))
	f.Add(uint8(0), []byte(`[{"id":null}]`))
	f.Add(uint8(0), []byte(`{"id":"a"}`))
	f.Add(uint8(1), []byte(`[{"id":"r1","prompt":"p","response":"r","reward":1.0}]`))
	f.Add(uint8(2), []byte(`[{"item_id":"i","checkpoint":"c","ordinal":1}]`))
	f.Add(uint8(3), []byte(`[]`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		k := fuzzKinds[int(kind)%len(fuzzKinds)]
		rec := fuzzDo(h, http.MethodPost, "/api/v1/stores/"+k+"/fz/rows", "", body)
		checkAnswer(t, "append "+k, rec)
		if rec.Code == http.StatusOK {
			var ok struct {
				Appended *int `json:"appended"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &ok); err != nil || ok.Appended == nil || *ok.Appended < 0 {
				t.Fatalf("200 without a count: %s", rec.Body)
			}
		}
	})
}

// FuzzHTTPCreateStore: POST /api/v1/stores/{kind}/{name} with any name and body.
func FuzzHTTPCreateStore(f *testing.F) {
	h := fuzzServer(f)
	f.Add(uint8(0), "gs", []byte(fuzzGenericSchema))
	f.Add(uint8(0), "gs2", []byte(`{"fields":[{"name":"id","type":"string"}],"seal_on_append":true}`))
	f.Add(uint8(0), "x", []byte(`{"fields":[{"name":"id","type":"int64"}]}`))
	f.Add(uint8(0), "..", []byte(`{"fields":[]}`))
	f.Add(uint8(1), "r", []byte(``))
	f.Add(uint8(2), "d", []byte(`{"seal_on_append":false}`))
	f.Add(uint8(0), "a/b", []byte(`{"fields":[{"name":"id","type":"string"},{"name":"id","type":"string"}]}`))
	f.Fuzz(func(t *testing.T, kind uint8, name string, body []byte) {
		k := fuzzKinds[int(kind)%len(fuzzKinds)]
		rec := fuzzDo(h, http.MethodPost, "/api/v1/stores/"+k+"/"+url.PathEscape(name), "", body)
		checkAnswer(t, "create "+k+"/"+name, rec)
		if rec.Code == http.StatusCreated && (store.ValidateName(name) != nil || strings.Contains(name, "/")) {
			t.Fatalf("created a store with an invalid name %q", name)
		}
	})
}

var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodHead, http.MethodOptions, http.MethodPatch}

// FuzzHTTPRequest: any method, path, query and body against the whole router.
func FuzzHTTPRequest(f *testing.F) {
	h := fuzzServer(f)
	f.Add(uint8(0), "/api/v1/stores", "kind=generic", []byte(nil))
	f.Add(uint8(0), "/api/v1/stores/generic/fz/rows", "source=all&limit=5&after=a", []byte(nil))
	f.Add(uint8(0), "/api/v1/stores/generic/fz/rows", "limit=-1", []byte(nil))
	f.Add(uint8(0), "/api/v1/stores/generic/fz/rows/a", "", []byte(nil))
	f.Add(uint8(2), "/api/v1/stores/generic/fz/rows/a", "", []byte(nil))
	f.Add(uint8(1), "/api/v1/stores/generic/fz/flush", "", []byte(nil))
	f.Add(uint8(1), "/api/v1/stores/generic/fz/merge-wal", "wait=true", []byte(nil))
	f.Add(uint8(0), "/api/v1/stores/generic/fz/stats", "", []byte(nil))
	f.Add(uint8(0), "/api/v1/stores/generic/%2e%2e/stats", "", []byte(nil))
	f.Add(uint8(1), "/api/v1/stores/generic/fz/rows", "", []byte(`[{"id":"z"}]`))
	f.Fuzz(func(t *testing.T, method uint8, path, query string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		rec := fuzzDo(h, m, path, query, body)
		checkAnswer(t, m+" "+path+"?"+query, rec)
	})
}
