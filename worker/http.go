package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// List paging bounds for GET .../rows.
const (
	defaultListLimit = 100
	maxListLimit     = 10000
)

// apiServer is the HTTP data plane (docs/DESIGN.md §5).
type apiServer struct {
	db      *store.DB
	cfg     Config
	log     *zap.Logger
	metrics *Metrics
	start   MergeStarter // nil: HTTP-only mode
	trigger *triggers    // count trigger after a manual flush, debt trigger
	auth    bool
	token   [sha256.Size]byte
	mux     *routeMux

	kickMu sync.Mutex
	kicked map[string]time.Time // target -> last debt-triggered merge start

	// stopping ends when the worker begins to stop: requests that only wait on Temporal
	// (merge-wal?wait=true) return at once instead of holding up the HTTP drain.
	stopping context.Context
	stop     context.CancelFunc
}

func newAPIServer(db *store.DB, cfg Config, log *zap.Logger, m *Metrics, start MergeStarter, trig *triggers) *apiServer {
	a := &apiServer{db: db, cfg: cfg, log: log, metrics: m, start: start, trigger: trig}
	if cfg.AuthToken != "" {
		a.auth = true
		a.token = sha256.Sum256([]byte(cfg.AuthToken))
	}
	a.kicked = map[string]time.Time{}
	a.stopping, a.stop = context.WithCancel(context.Background())
	mux := newRouteMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /api/v1/stores", a.listStores)
	mux.HandleFunc("POST /api/v1/stores/{kind}/{name}", a.createStore)
	mux.HandleFunc("POST /api/v1/stores/{kind}/{name}/rows", a.appendRows)
	mux.HandleFunc("GET /api/v1/stores/{kind}/{name}/rows", a.listRows)
	mux.HandleFunc("GET /api/v1/stores/{kind}/{name}/rows/{id}", a.getRow)
	mux.HandleFunc("DELETE /api/v1/stores/{kind}/{name}/rows/{id}", a.deleteRow)
	mux.HandleFunc("POST /api/v1/stores/{kind}/{name}/flush", a.flush)
	mux.HandleFunc("POST /api/v1/stores/{kind}/{name}/merge-wal", a.mergeWal)
	mux.HandleFunc("GET /api/v1/stores/{kind}/{name}/stats", a.stats)
	a.mux = mux
	return a
}

// reqInfo is filled by handlers for the request log line.
type reqInfo struct {
	target string
	code   string
	err    string
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

// ServeHTTP: request log + metrics → auth → path check → routes (JSON 404/405 fallback).
func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ri := &reqInfo{}
	r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
	sw := &statusWriter{ResponseWriter: w}
	h, pattern := a.mux.Handler(r)
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	a.serve(sw, r, h, pattern)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
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
		fields := []zap.Field{zap.String("method", r.Method), zap.String("route", route),
			zap.Int("status", status), zap.Duration("duration", d)}
		if ri.target != "" {
			fields = append(fields, zap.String("target", ri.target))
		}
		if ri.code != "" {
			fields = append(fields, zap.String("code", ri.code), zap.String("error", ri.err))
		}
		ce.Write(fields...)
	}
}

// serve runs one request; h and pattern are the mux's match for r.
func (a *apiServer) serve(w http.ResponseWriter, r *http.Request, h http.Handler, pattern string) {
	if a.auth && r.URL.Path != "/healthz" && !a.authorized(r) {
		a.fail(w, r, newAPIError(http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token"))
		return
	}
	// The mux would redirect "." and ".." segments to a cleaned path; refuse them instead, so
	// a traversal attempt is a plain 400 that touches nothing.
	for _, seg := range strings.Split(r.URL.EscapedPath(), "/") {
		if u := unescapeSegment(seg); u == "." || u == ".." {
			a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidName, "path segment %q is not allowed", u))
			return
		}
	}
	if pattern == "" {
		// Not found, method not allowed or a redirect: let the mux decide the status and
		// headers, then answer in JSON.
		cw := &captureWriter{header: http.Header{}}
		h.ServeHTTP(cw, r)
		switch cw.status {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", cw.header.Get("Allow"))
			a.fail(w, r, newAPIError(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				"%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, cw.header.Get("Allow")))
			return
		case http.StatusNotFound, 0:
			a.fail(w, r, newAPIError(http.StatusNotFound, CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
			return
		}
	}
	a.mux.ServeHTTP(w, r)
}

func unescapeSegment(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// captureWriter swallows the mux's plain-text 404/405 so they can be answered in JSON.
type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return len(b), nil
}
func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

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

// fail writes err as a JSON error and records it for the request log.
func (a *apiServer) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	ri := infoFrom(r.Context())
	ri.code, ri.err = ae.Code, ae.Message
	if ae.Status >= 500 && ae.Status != StatusClientClosedRequest {
		a.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.String("target", ri.target), zap.String("code", ae.Code), zap.Error(err))
	}
	writeAPIError(w, ae)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		buf, _ = json.Marshal(map[string]string{"error": "encode response: " + err.Error(), "code": CodeInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(buf, '\n'))
}

func (a *apiServer) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "shard": a.db.Shard()})
}

// target reads {kind} and {name}: unknown_kind / invalid_name on bad input.
func (a *apiServer) target(r *http.Request) (store.Target, error) {
	k, err := store.ParseKind(r.PathValue("kind"))
	if err != nil {
		return store.Target{}, newAPIError(http.StatusBadRequest, CodeUnknownKind,
			"unknown store kind %q (want rollout, generic or datagen)", r.PathValue("kind"))
	}
	name := r.PathValue("name")
	if err := store.ValidateName(name); err != nil {
		return store.Target{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidName, Message: err.Error()}
	}
	t := store.Target{Kind: k, Name: name}
	infoFrom(r.Context()).target = t.String()
	return t, nil
}

// openStore resolves the path to an existing store (store_not_found otherwise).
func (a *apiServer) openStore(r *http.Request) (*store.Store, error) {
	t, err := a.target(r)
	if err != nil {
		return nil, err
	}
	s, err := a.db.Open(r.Context(), t)
	if err != nil {
		return nil, notFoundAs(err, CodeStoreNotFound)
	}
	return s, nil
}

// readJSONBody is readBody plus checkJSON (syntax and duplicate member names).
func (a *apiServer) readJSONBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) ([]byte, error) {
	body, err := a.readBody(w, r, allowEmpty)
	if err != nil || body == nil {
		return nil, err
	}
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// readBody enforces the media type and the size cap. An empty body is returned as nil when
// allowEmpty, and is invalid_json otherwise.
func (a *apiServer) readBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) ([]byte, error) {
	if r.ContentLength > a.cfg.MaxBodyBytes {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"request body is larger than %d bytes", a.cfg.MaxBodyBytes)
	}
	if allowEmpty && r.ContentLength == 0 {
		return nil, nil // e.g. curl -X POST -d '' (which sends a form content type)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type must be application/json")
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type %q is not application/json", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, newAPIError(http.StatusBadRequest, CodeInvalidJSON, "read body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil, nil
		}
		return nil, newAPIError(http.StatusBadRequest, CodeInvalidJSON, "empty body; want JSON")
	}
	return body, nil
}

// invalidJSON describes why body is not JSON.
func invalidJSON(body []byte) *apiError {
	var v any
	msg := "malformed JSON"
	if err := json.Unmarshal(body, &v); err != nil {
		msg = err.Error()
	}
	return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%s", msg)
}

// checkJSON rejects malformed JSON (invalid_json) and objects with a repeated member name
// (invalid_input): encoding/json would silently keep the last one.
func checkJSON(body []byte) error {
	if !json.Valid(body) {
		return invalidJSON(body)
	}
	if !bytes.Contains(body, []byte{'{'}) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		obj    bool
		keys   map[string]struct{}
		expKey bool // next token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				return newAPIError(http.StatusBadRequest, CodeInvalidInput,
					"duplicate field %q in a JSON object (at byte %d)", key, dec.InputOffset())
			}
			top.keys[key] = struct{}{}
			top.expKey = false
			continue
		}
		// A value (or the end of an array).
		if top != nil && top.obj {
			top.expKey = true
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]struct{}{}, expKey: true})
			case '[':
				stack = append(stack, &frame{})
			case ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expKey = true
				}
			}
		}
	}
}

// decodeStrict unmarshals body into v, refusing unknown fields and trailing data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "%v", err)
	}
	if dec.More() {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "trailing data after the JSON value")
	}
	return nil
}

// --- stores -----------------------------------------------------------------------------

type createRequest struct {
	Fields       []store.Field `json:"fields"`
	SealOnAppend *bool         `json:"seal_on_append,omitempty"`
}

// storeInfo is one entry of GET /api/v1/stores: the registry entry plus its target string.
type storeInfo struct {
	Target string `json:"target"`
	store.StoreInfo
}

type storeResponse struct {
	Target string       `json:"target"`
	Kind   string       `json:"kind"`
	Name   string       `json:"name"`
	Schema store.Schema `json:"schema"`
}

func (a *apiServer) createStore(w http.ResponseWriter, r *http.Request) {
	t, err := a.target(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := a.readJSONBody(w, r, t.Kind != store.KindGeneric)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req createRequest
	if body != nil {
		if err := decodeStrict(body, &req); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	var opts store.CreateOptions
	opts.SealOnAppend = req.SealOnAppend
	if req.Fields != nil {
		sch := store.Schema{Fields: req.Fields}
		if err := store.ValidateSchema(t.Kind, sch); err != nil {
			a.fail(w, r, err)
			return
		}
		opts.Schema = &sch
	} else if t.Kind == store.KindGeneric {
		a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput,
			`a generic store needs a schema: {"fields":[{"name":"id","type":"string"}, ...]}`))
		return
	}
	s, err := a.db.Create(r.Context(), t, opts)
	if err != nil {
		if errors.Is(err, store.ErrAlreadyExists) && opts.Schema != nil {
			if ex, oerr := a.db.Open(r.Context(), t); oerr == nil && !ex.Codec().Schema().Equal(*opts.Schema) {
				a.fail(w, r, newAPIError(http.StatusConflict, CodeSchemaMismatch,
					"store %s exists with another schema", t))
				return
			}
		}
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, storeResponse{Target: t.String(), Kind: string(t.Kind), Name: t.Name,
		Schema: s.Codec().Schema()})
}

func (a *apiServer) listStores(w http.ResponseWriter, r *http.Request) {
	kinds, after, limit, err := storesQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := listStoresPage(r.Context(), a.db, kinds, after, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *apiServer) stats(w http.ResponseWriter, r *http.Request) {
	s, err := a.openStore(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	st, err := s.Stats(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// --- rows -------------------------------------------------------------------------------

func (a *apiServer) appendRows(w http.ResponseWriter, r *http.Request) {
	t, err := a.target(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The codec checks everything about the rows (duplicate fields included), so the body
	// only needs to be JSON here.
	body, err := a.readBody(w, r, false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !json.Valid(body) {
		a.fail(w, r, invalidJSON(body))
		return
	}
	s, err := a.db.Open(r.Context(), t)
	if err != nil {
		a.fail(w, r, notFoundAs(err, CodeStoreNotFound))
		return
	}
	rows, err := s.Codec().DecodeJSON(body, a.cfg.MaxRowBytes)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.checkDebt(s); err != nil {
		a.fail(w, r, err)
		return
	}
	if len(rows) > 0 {
		if _, err := s.Append(r.Context(), rows); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"appended": len(rows)})
}

func (a *apiServer) getRow(w http.ResponseWriter, r *http.Request) {
	s, err := a.openStore(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	row, err := s.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, notFoundAs(err, CodeRowNotFound))
		return
	}
	writeJSON(w, http.StatusOK, row)
}

func (a *apiServer) listRows(w http.ResponseWriter, r *http.Request) {
	s, err := a.openStore(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	opts := store.ListOptions{Source: q.Get("source"), Limit: defaultListLimit, After: q.Get("after")}
	switch opts.Source {
	case "":
		opts.Source = "all"
	case "all", "base", "wal":
	default:
		a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput, "source %q is not all, base or wal", opts.Source))
		return
	}
	if ls := q.Get("limit"); ls != "" {
		n, err := strconv.Atoi(ls)
		if err != nil || n < 1 || n > maxListLimit {
			a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput, "limit %q is not an integer in 1..%d", ls, maxListLimit))
			return
		}
		opts.Limit = n
	}
	page, err := s.List(r.Context(), opts)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rows := page.Rows
	if rows == nil {
		rows = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"rows": rows, "next": page.Next})
}

func (a *apiServer) deleteRow(w http.ResponseWriter, r *http.Request) {
	s, err := a.openStore(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if id == "" {
		a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput, "empty row id"))
		return
	}
	if err := s.Delete(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": id})
}

// --- maintenance ------------------------------------------------------------------------

type flushResponse struct {
	Target     string  `json:"target"`
	Sealed     bool    `json:"sealed"`
	Generation *uint64 `json:"generation"`
	Rows       int     `json:"rows"`
	Pending    int     `json:"pending"`
}

func (a *apiServer) flush(w http.ResponseWriter, r *http.Request) {
	s, err := a.openStore(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := s.Flush(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The count trigger rides a manual seal too; its failure never fails the flush.
	a.trigger.afterFlush(s.Target(), res)
	out := flushResponse{Target: s.Target().String(), Sealed: res.Sealed, Rows: res.Rows, Pending: res.Pending}
	if res.Sealed {
		g := res.Generation
		out.Generation = &g
	}
	writeJSON(w, http.StatusOK, out)
}

// mergeRequest is the optional body of POST .../merge-wal.
type mergeRequest struct {
	MaxGenerations  *int   `json:"max_generations,omitempty"`
	MaxBytes        *int64 `json:"max_bytes,omitempty"`
	ParallelPrepare bool   `json:"parallel_prepare,omitempty"`
	MaxPasses       int    `json:"max_passes,omitempty"`
}

func (a *apiServer) mergeWal(w http.ResponseWriter, r *http.Request) {
	t, err := a.target(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wait := false
	if ws := r.URL.Query().Get("wait"); ws != "" {
		if wait, err = strconv.ParseBool(ws); err != nil {
			a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput, "wait %q is not a boolean", ws))
			return
		}
	}
	body, err := a.readJSONBody(w, r, true)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req mergeRequest
	if body != nil {
		if err := decodeStrict(body, &req); err != nil {
			a.fail(w, r, err)
			return
		}
		if (req.MaxGenerations != nil && *req.MaxGenerations < 0) || (req.MaxBytes != nil && *req.MaxBytes < 0) || req.MaxPasses < 0 {
			a.fail(w, r, newAPIError(http.StatusBadRequest, CodeInvalidInput, "merge knobs must not be negative"))
			return
		}
	}
	if a.start == nil {
		a.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: CodeTemporalUnavailable,
			Message: "this worker runs without Temporal (HTTP-only mode); merges run only through Temporal"})
		return
	}
	if _, err := a.db.Open(r.Context(), t); err != nil {
		a.fail(w, r, notFoundAs(err, CodeStoreNotFound))
		return
	}
	in := contract.MergeWalInput{Target: t.String(), MaxGenerations: req.MaxGenerations, MaxBytes: req.MaxBytes,
		ParallelPrepare: req.ParallelPrepare, MaxPasses: req.MaxPasses}
	run, err := a.start(r.Context(), t, in)
	a.metrics.trigger(TriggerHTTP, err)
	if err != nil {
		a.fail(w, r, classifyTemporal(err))
		return
	}
	out := map[string]any{"workflow_id": run.GetID(), "run_id": run.GetRunID()}
	if !wait {
		writeJSON(w, http.StatusAccepted, out)
		return
	}
	// Waiting never holds up shutdown: the workflow keeps running in Temporal either way.
	wctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.stopping, cancel)()
	var res contract.MergeWalResult
	if err := run.Get(wctx, &res); err != nil {
		if a.stopping.Err() != nil {
			a.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Extra: out,
				Message: fmt.Sprintf("worker is stopping; MergeWal %s keeps running in Temporal", run.GetID())})
			return
		}
		if r.Context().Err() != nil {
			a.fail(w, r, r.Context().Err())
			return
		}
		a.fail(w, r, &apiError{Status: http.StatusInternalServerError, Code: CodeMergeFailed,
			Message: fmt.Sprintf("MergeWal %s failed: %v", run.GetID(), err), Extra: out})
		return
	}
	out["result"] = res
	writeJSON(w, http.StatusOK, out)
}

// --- append back-pressure -----------------------------------------------------------------

// debtKickEvery rate-limits the merge start for a store refusing appends.
const debtKickEvery = 30 * time.Second

// checkDebt refuses an append (too_many_pending, 503 + Retry-After) when this worker's shard
// of the store already lists PendingMax pending generations. The count is the resident
// writer's (store.OwnPending: no I/O).
func (a *apiServer) checkDebt(s *store.Store) error {
	limit := a.cfg.PendingMax
	if limit <= 0 {
		return nil
	}
	pending := s.OwnPending()
	if pending < limit {
		return nil
	}
	a.kickDebtMerge(s.Target(), pending)
	return &apiError{Status: http.StatusServiceUnavailable, Code: CodeTooManyPending, RetryAfter: retryAfterDebt,
		Message: fmt.Sprintf("store %s: this worker's shard has %d pending generations (limit %d); retry after merges catch up",
			s.Target(), pending, limit)}
}

// kickDebtMerge starts (or attaches to) MergeWal for a store refusing appends, in the
// background and at most once per debtKickEvery per store: refused writers produce no seals,
// so the count trigger would not fire again.
func (a *apiServer) kickDebtMerge(t store.Target, pending int) {
	if a.trigger == nil || a.start == nil {
		return
	}
	key := t.String()
	now := time.Now()
	a.kickMu.Lock()
	if last, ok := a.kicked[key]; ok && now.Sub(last) < debtKickEvery {
		a.kickMu.Unlock()
		return
	}
	a.kicked[key] = now
	a.kickMu.Unlock()
	a.trigger.fire(TriggerDebt, t, pending)
}
