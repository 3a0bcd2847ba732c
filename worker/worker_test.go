package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/store"
)

// testConfig is a fast, deterministic configuration on a fresh file:// root: loopback port 0,
// no flush sweeper (tests seal explicitly), and with Temporal no schedule, stuck scan or
// fairness probe to wait on.
func testConfig(t testing.TB) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Instance = "test-" + strings.ReplaceAll(t.Name(), "/", "-")
	cfg.Storage = "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg.Listen = "127.0.0.1:0"
	cfg.FlushInterval = 0
	cfg.SweepInterval, cfg.ReconcileInterval, cfg.StuckScanInterval = 0, 0, 0
	cfg.FairnessProbe = false
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// startWorker starts an HTTP-only worker, optionally with an injected merge starter (which
// stands in for Temporal), and stops it at the end of the test.
func startWorker(t *testing.T, cfg Config, start MergeStarter) *Worker {
	t.Helper()
	return startWorkerLogging(t, cfg, start, zaptest.NewLogger(t))
}

// startWorkerLogging is startWorker with the worker's logger (zap.NewNop() for a test that
// makes too many requests for the test log).
func startWorkerLogging(t testing.TB, cfg Config, start MergeStarter, log *zap.Logger) *Worker {
	t.Helper()
	w := newWorker(t, cfg, log, nil)
	w.start = start
	return started(t, w)
}

// newWorker is New on the Temporal client tc (nil: HTTP-only), failing t on an error.
func newWorker(t testing.TB, cfg Config, log *zap.Logger, tc client.Client) *Worker {
	t.Helper()
	w, err := New(cfg, log, tc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return w
}

// started starts w and stops it when t ends.
func started(t testing.TB, w *Worker) *Worker {
	t.Helper()
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopAtCleanup(t, "Stop", w.Stop)
	return w
}

// stopAtCleanup calls stop when t ends, giving it 30 s, and fails t if it fails.
func stopAtCleanup(t testing.TB, what string, stop func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// fakeRun is a client.WorkflowRun whose result is fixed.
type fakeRun struct {
	id, runID string
	result    contract.MergeWalResult
	err       error
	delay     time.Duration // Get answers after it; < 0: only when its context ends
	waiting   chan struct{} // when set, closed once a caller waits in Get
}

func (r *fakeRun) GetID() string                  { return r.id }
func (r *fakeRun) GetRunID() string               { return r.runID }
func (r *fakeRun) GetFirstExecutionRunID() string { return r.runID }
func (r *fakeRun) Get(ctx context.Context, v any) error {
	return r.GetWithOptions(ctx, v, client.WorkflowRunGetOptions{})
}
func (r *fakeRun) GetWithOptions(ctx context.Context, v any, _ client.WorkflowRunGetOptions) error {
	if r.waiting != nil {
		close(r.waiting)
	}
	var after <-chan time.Time
	if r.delay >= 0 {
		after = time.After(r.delay)
	}
	select {
	case <-after:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.err != nil {
		return r.err
	}
	*(v.(*contract.MergeWalResult)) = r.result
	return nil
}

// startsRun is a MergeStarter whose runs are copies of run under the target's MergeWal ID.
func startsRun(run fakeRun) MergeStarter {
	return func(_ context.Context, t store.Target, _ contract.MergeWalInput, _ ...contract.StartOption) (client.WorkflowRun, error) {
		r := run
		r.id, r.runID = "merge-wal/"+t.Path(), cmp.Or(r.runID, "r")
		return &r, nil
	}
}

// serveAPI starts a worker on cfg whose merge starts rs records, and a client of its API.
func serveAPI(t *testing.T, cfg Config) (w *Worker, c *apiClient, rs *recStarter) {
	t.Helper()
	rs = &recStarter{}
	w = startWorker(t, cfg, rs.start)
	return w, newClient(t, w), rs
}

// recStarter records MergeWal starts; fail makes the next starts fail.
type recStarter struct {
	mu    sync.Mutex
	calls []startCall
	fail  error
}

type startCall struct {
	target string
	in     contract.MergeWalInput
}

func (s *recStarter) start(_ context.Context, t store.Target, in contract.MergeWalInput, _ ...contract.StartOption) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, startCall{t.String(), in})
	if s.fail != nil {
		return nil, s.fail
	}
	return &fakeRun{id: "merge-wal/" + t.Path(), runID: "run-1",
		result: contract.MergeWalResult{Target: t.String(), Reclaimed: 2}}, nil
}

func (s *recStarter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *recStarter) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// client helpers ---------------------------------------------------------------------------

// send sends req with cl (nil: http.DefaultClient) and reads the whole answer.
func send(t testing.TB, cl *http.Client, req *http.Request) resp {
	t.Helper()
	if cl == nil {
		cl = http.DefaultClient
	}
	res, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

type apiClient struct {
	t     *testing.T
	base  string
	token string
}

func newClient(t *testing.T, w *Worker) *apiClient {
	return &apiClient{t: t, base: "http://" + w.HTTPAddr()}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return m
}

// do sends a request; a path with escapes is sent exactly as written.
func (c *apiClient) do(method, path, contentType string, body []byte) resp {
	c.t.Helper()
	r := apitest.Client{T: c.t, Base: c.base, Token: c.token}.DoType(method, path, contentType, body)
	return resp{status: r.Status, header: r.Header, body: r.Body}
}

func (c *apiClient) postJSON(path, body string) resp {
	return c.do(http.MethodPost, path, "application/json", []byte(body))
}

// sealGS appends rows (a JSON array) to generic:gs and flushes them into one generation.
func (c *apiClient) sealGS(t *testing.T, rows string) {
	t.Helper()
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", rows), http.StatusOK, "")
	expect(t, c.do(http.MethodPost, "/api/v1/stores/generic/gs/flush", "", nil), http.StatusOK, "")
}

func (c *apiClient) get(path string) resp { return c.do(http.MethodGet, path, "", nil) }

// expect checks the status (and, for errors, the stable code).
func expect(t *testing.T, r resp, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && code != "" {
		t.Fatalf("error response Content-Type %q is not JSON", ct)
	}
	if code == "" {
		return nil
	}
	m := r.json(t)
	if m["code"] != code {
		t.Fatalf("code %v, want %q: %s", m["code"], code, r.body)
	}
	if msg, _ := m["error"].(string); msg == "" {
		t.Fatalf("error response has no message: %s", r.body)
	}
	return m
}

const genericSchema = `{"fields":[{"name":"id","type":"string"},{"name":"n","type":"int64","nullable":true},{"name":"s","type":"string","nullable":true}]}`

// --- worker lifecycle tests -----------------------------------------------------------------

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.MergeSlots = 0
	cfg.Listen = "nonsense"
	if _, err := New(cfg, nil, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	} else if !strings.Contains(err.Error(), "--merge-slots") || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("error does not name every bad knob: %v", err)
	}
}

func TestWorkerStopSealsMemtablesForOtherProcesses(t *testing.T) {
	cfg := testConfig(t)
	w := newWorker(t, cfg, zaptest.NewLogger(t), nil)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.HTTPAddr() == "" || w.DB() == nil || w.Handler() == nil {
		t.Fatal("started worker lacks address, DB or handler")
	}
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a","n":1}]`), http.StatusOK, "")
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// Another instance (another shard) sees the row: Stop sealed the memtable.
	opts := store.DefaultOptions()
	opts.InstanceID = "someone-else"
	db, err := store.OpenDB(context.Background(), cfg.Storage, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	s, err := db.Open(context.Background(), store.Target{Kind: store.KindGeneric, Name: "gs"})
	if err != nil {
		t.Fatal(err)
	}
	row, err := s.Get(context.Background(), "a")
	if err != nil {
		t.Fatalf("row not visible to another process after Stop: %v", err)
	}
	if fmt.Sprint(row["n"]) != "1" {
		t.Fatalf("row = %v", row)
	}
}

func TestWorkerStartFailsCleanlyOnBusyPort(t *testing.T) {
	first := startWorker(t, testConfig(t), nil)
	cfg := testConfig(t)
	cfg.Listen = first.HTTPAddr()
	w := newWorker(t, cfg, zaptest.NewLogger(t), nil)
	if err := w.Start(context.Background()); err == nil {
		t.Fatal("Start on a busy port succeeded")
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after failed Start: %v", err)
	}
}

// Stop does not wait for merge-wal?wait=true requests: they answer 503 shutting_down (the
// workflow keeps running in Temporal) and the worker stops promptly.
func TestWorkerStopDoesNotWaitForMergeWaiters(t *testing.T) {
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 20 * time.Second
	w := newWorker(t, cfg, zaptest.NewLogger(t), nil)
	waiting := make(chan struct{})
	w.start = startsRun(fakeRun{delay: -1, waiting: waiting})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, w)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	got := make(chan resp, 1)
	go func() { got <- c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait=true", "", nil) }()
	// Stop only once the handler is blocked waiting for the workflow's result.
	select {
	case <-waiting:
	case r := <-got:
		t.Fatalf("merge-wal?wait=true answered before waiting: %d %s", r.status, r.body)
	case <-time.After(time.Minute):
		t.Fatal("merge-wal?wait=true never reached the wait")
	}
	begin := time.Now()
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Stop took %v behind a merge waiter", d)
	}
	r := <-got
	m := expect(t, r, http.StatusServiceUnavailable, CodeShuttingDown)
	if m["workflow_id"] != "merge-wal/generic/gs" {
		t.Fatalf("shutting_down answer lacks the workflow id: %s", r.body)
	}
}

// Handler is the HTTP data plane (nil before Start), for tests that serve it with httptest.
func (w *Worker) Handler() http.Handler {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.api == nil {
		return nil
	}
	return w.api
}
