package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/promtext"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
	"github.com/walkeeper/walkeeper/workflows"
)

// Generous bounds: the machine running these tests may be small and heavily loaded. They
// bound waits for things that normally take well under a second; none is a performance
// assertion unless its test says so.
const (
	waitShort = time.Minute
	waitLong  = 3 * time.Minute
)

// env is one test's slice of the shared Temporal server: its own namespace, a client bound
// to it, a logger writing to a per-test file, and a file:// storage root.
type env struct {
	t        *testing.T
	ns       string
	hostPort string
	c        client.Client
	log      *zap.Logger
	logPath  string
	dir      string
	storage  string
}

// newEnv marks t parallel and gives it a namespace of its own.
func newEnv(t *testing.T) *env {
	t.Helper()
	ns := suite.Namespace(t)
	t.Parallel()
	e := &env{t: t, ns: ns, hostPort: suite.HostPort(), dir: t.TempDir()}
	e.storage = "file://" + filepath.ToSlash(filepath.Join(e.dir, "storage"))
	e.logPath = suite.LogPath(safeName(t.Name()))
	e.log = fileLogger(t, e.logPath)
	suite.KeepLogsIfFailed(t, e.logPath)
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	c, err := temporaladmin.Dial(ctx, temporaladmin.Config{HostPort: e.hostPort, Namespace: e.ns}, e.log.Named("client"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c
	// worker.New registers them too; harness workers and bare clients rely on this.
	if err := temporaladmin.EnsureSearchAttributes(ctx, c, e.ns); err != nil {
		t.Fatal(err)
	}
	return e
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// fileLogger logs at info level to path; it outlives the test (SDK goroutines may log after
// the test returned, which a testing.T logger would turn into a panic).
func fileLogger(t *testing.T, path string) *zap.Logger {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(f)), zapcore.InfoLevel)
	return zap.New(core).With(zap.String("test", t.Name()))
}

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

// --- workers -----------------------------------------------------------------------------

// config is a worker configuration for this env: the shared storage root, the test's
// namespace, a free HTTP port, no sweep schedule, no flush sweeper, no count trigger and
// no fairness probe (whose workflows would show in the tests' listings) unless the test
// turns them on.
func (e *env) config(instance string) worker.Config {
	cfg := worker.DefaultConfig()
	cfg.Instance = instance
	cfg.Storage = e.storage
	cfg.Temporal.Config = temporaladmin.Config{HostPort: e.hostPort, Namespace: e.ns}
	cfg.Listen = "127.0.0.1:0"
	cfg.SweepInterval = 0
	cfg.FlushInterval = 0
	cfg.MergeAfterGenerations = 0
	cfg.FairnessProbe = false
	cfg.ShutdownTimeout = time.Minute
	// A race build on a shared 2-core machine can hold a workflow task past the SDK's 1 s
	// without a bug, and the SDK's race with the coroutine it then abandons fails the test.
	cfg.WorkflowDeadlock = time.Minute
	return cfg
}

// startWorker starts an in-process worker (worker.New + Start) connected to the test's
// namespace; it is stopped when the test ends unless the test stops it first.
func (e *env) startWorker(cfg worker.Config) *worker.Worker {
	e.t.Helper()
	w, err := worker.New(cfg, e.log.Named(cfg.Instance), e.c)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Start(e.ctx(waitLong)); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			e.t.Errorf("stop worker %s: %v", cfg.Instance, err)
		}
	})
	return w
}

// harness runs Temporal workers the way worker.Worker does (workflows and activities on the
// shared queue, activities only on each shard's own queue) but over store.DB handles the
// test built itself, so a test can inject storage faults or wrap activities.
type harness struct {
	mu      sync.Mutex
	workers []tworker.Worker
}

type harnessOptions struct {
	// Shared serves the shared queue (workflows and activities); nil = no shared worker.
	Shared *store.DB
	// Shards each serve their own shard queue.
	Shards []*store.DB
	// Register registers the activities of one DB; nil = activities.Register.
	Register func(r tworker.ActivityRegistry, a *activities.Activities)
	// MergeSlots bounds activities per shard worker (default 4, as worker.DefaultConfig).
	MergeSlots int
}

func (e *env) startHarness(o harnessOptions) *harness {
	e.t.Helper()
	if o.Register == nil {
		o.Register = activities.Register
	}
	if o.MergeSlots == 0 {
		o.MergeSlots = 4
	}
	h := &harness{}
	e.t.Cleanup(h.stop)
	acts := func(db *store.DB) *activities.Activities {
		return &activities.Activities{DB: db, Logger: e.log.Named("harness-activities"), Client: e.c}
	}
	if o.Shared != nil {
		w := tworker.New(e.c, contract.TaskQueue, tworker.Options{
			Identity:                           "harness-shared@" + o.Shared.Shard(),
			MaxConcurrentActivityExecutionSize: 8,
			DeadlockDetectionTimeout:           time.Minute,
		})
		workflows.Register(w)
		o.Register(w, acts(o.Shared))
		h.start(e.t, w)
	}
	for _, db := range o.Shards {
		w := tworker.New(e.c, contract.ShardQueue(db.Shard()), tworker.Options{
			Identity:                           "harness-shard@" + db.Shard(),
			MaxConcurrentActivityExecutionSize: o.MergeSlots,
			DisableWorkflowWorker:              true,
		})
		o.Register(w, acts(db))
		h.start(e.t, w)
	}
	return h
}

func (h *harness) start(t *testing.T, w tworker.Worker) {
	t.Helper()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
}

func (h *harness) stop() {
	h.mu.Lock()
	ws := h.workers
	h.workers = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Stop()
		}()
	}
	wg.Wait()
}

// --- stores ------------------------------------------------------------------------------

// openDB opens the env's storage root as instance (shard ShardID(instance)); closed (and
// sealed) at the end of the test unless closed before.
func (e *env) openDB(instance string, mutate func(*store.Options)) *store.DB {
	e.t.Helper()
	opts := e.storeOptions(instance, mutate)
	db, err := store.OpenDB(e.ctx(waitShort), e.storage, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// storeOptions are the store options a worker with default config would use, with a budget
// of worker.DefaultConfig's size.
func (e *env) storeOptions(instance string, mutate func(*store.Options)) store.Options {
	cfg := e.config(instance)
	opts := cfg.StoreOptions()
	opts.Logger = e.log.Named("db-" + instance)
	opts.Budget = store.NewBudget(cfg.MergeBudgetBytes)
	if mutate != nil {
		mutate(&opts)
	}
	return opts
}

// openDBWithFaults is openDB over a fault-injecting view of the storage root.
func (e *env) openDBWithFaults(instance string, f objstore.Faults, mutate func(*store.Options)) *store.DB {
	e.t.Helper()
	b, err := objstore.OpenBucket(e.ctx(waitShort), e.storage)
	if err != nil {
		e.t.Fatal(err)
	}
	opts := e.storeOptions(instance, mutate)
	db := store.OpenDBOnBucket(b.WithFaults(f), opts)
	e.t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// genericSchema is the schema every generic test store uses.
var genericSchema = store.Schema{Fields: []store.Field{
	{Name: "id", Type: store.TypeString},
	{Name: "v", Type: store.TypeInt64, Nullable: true},
	{Name: "note", Type: store.TypeString, Nullable: true},
}}

const genericSchemaJSON = `{"fields":[{"name":"id","type":"string"},{"name":"v","type":"int64","nullable":true},{"name":"note","type":"string","nullable":true}]}`

func mustTarget(t *testing.T, s string) store.Target {
	t.Helper()
	tg, err := store.ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// createStore creates target in db (generic targets get genericSchema) or opens it if it
// exists.
func (e *env) createStore(db *store.DB, target string) *store.Store {
	e.t.Helper()
	tg := mustTarget(e.t, target)
	co := store.CreateOptions{}
	if tg.Kind == store.KindGeneric {
		sc := genericSchema
		co.Schema = &sc
	}
	s, err := db.Create(e.ctx(waitShort), tg, co)
	if errors.Is(err, store.ErrAlreadyExists) {
		s, err = db.Open(e.ctx(waitShort), tg)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// appendJSON appends rows (JSON objects) as the HTTP route does (Store.AppendJSON).
func (e *env) appendJSON(s *store.Store, rows []map[string]any) {
	e.t.Helper()
	if err := appendRows(e.ctx(waitShort), s, rows); err != nil {
		e.t.Fatal(err)
	}
}

// appendRows is appendJSON for goroutines, which must not call t.Fatal.
func appendRows(ctx context.Context, s *store.Store, rows []map[string]any) error {
	body, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	_, err = s.AppendJSON(ctx, body)
	return err
}

func (e *env) flush(s *store.Store) store.FlushResult {
	e.t.Helper()
	res, err := s.Flush(e.ctx(waitShort))
	if err != nil {
		e.t.Fatal(err)
	}
	if !res.Sealed {
		e.t.Fatalf("flush of %s sealed nothing", s.Target())
	}
	return res
}

// writeGenerations appends and seals gens generations of rowsPerGen rows each, with keys
// prefix0000.. and v = generation number, returning the keys written.
func (e *env) writeGenerations(s *store.Store, prefix string, gens, rowsPerGen int) []string {
	e.t.Helper()
	return e.writeGenerationsWith(s, prefix, gens, rowsPerGen, 32)
}

// writeGenerationsWith is writeGenerations with noteBytes bytes of payload per row.
func (e *env) writeGenerationsWith(s *store.Store, prefix string, gens, rowsPerGen, noteBytes int) []string {
	e.t.Helper()
	note := strings.Repeat("x", noteBytes)
	var keys []string
	for g := range gens {
		rows := make([]map[string]any, rowsPerGen)
		for i := range rows {
			k := fmt.Sprintf("%s%04d", prefix, g*rowsPerGen+i)
			keys = append(keys, k)
			rows[i] = map[string]any{"id": k, "v": g, "note": note}
		}
		e.appendJSON(s, rows)
		e.flush(s)
	}
	return keys
}

// writeWithoutWorker creates target and seals gens generations of rowsPerGen rows as
// instance, then closes that instance: no worker serves its shard queue, so a MergeWal of
// target waits there until the test gives it one. Returns the keys written.
func (e *env) writeWithoutWorker(instance, target string, gens, rowsPerGen int) []string {
	e.t.Helper()
	db := e.openDB(instance, nil)
	keys := e.writeGenerations(e.createStore(db, target), "k", gens, rowsPerGen)
	if err := db.Close(e.ctx(waitShort)); err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// stats reads the target's stats through a fresh handle on the storage root.
func (e *env) stats(db *store.DB, target string) store.Stats {
	e.t.Helper()
	s, err := db.Open(e.ctx(waitShort), mustTarget(e.t, target))
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := s.Stats(e.ctx(waitShort))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// --- HTTP --------------------------------------------------------------------------------

// api calls one worker's HTTP data plane.
type api struct {
	t    *testing.T
	base string
}

func newAPI(t *testing.T, addr string) api { return api{t: t, base: "http://" + addr} }

// call sends body (a string, or nil) and decodes a JSON answer into out (when non-nil).
func (a api) call(method, path string, body any, out any) int {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	r := apitest.Client{T: a.t, Base: a.base, Ctx: ctx}.Do(method, path, body)
	if err := r.Decode(out); err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r.Status
}

// must is call that fails the test unless the status is want.
func (a api) must(want int, method, path string, body any, out any) {
	a.t.Helper()
	var raw json.RawMessage
	st := a.call(method, path, body, &raw)
	if st != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatal(err)
		}
	}
}

// allRows pages through GET .../rows?source=all.
func (a api) allRows(kind, name string) []map[string]any {
	a.t.Helper()
	var rows []map[string]any
	after := ""
	for {
		var page struct {
			Rows []map[string]any `json:"rows"`
			Next string           `json:"next"`
		}
		path := fmt.Sprintf("/api/v1/stores/%s/%s/rows?source=all&limit=100", kind, name)
		if after != "" {
			path += "&after=" + after
		}
		a.must(200, "GET", path, nil, &page)
		rows = append(rows, page.Rows...)
		if page.Next == "" {
			return rows
		}
		after = page.Next
	}
}

// create creates generic store name with genericSchema.
func (a api) create(name string) {
	a.t.Helper()
	a.must(201, "POST", "/api/v1/stores/generic/"+name, genericSchemaJSON, nil)
}

// seal appends row r<i> (v = i) to generic store name for each i in [from, from+n), each
// flushed into a generation of its own.
func (a api) seal(name string, from, n int) {
	a.t.Helper()
	for i := from; i < from+n; i++ {
		a.must(200, "POST", "/api/v1/stores/generic/"+name+"/rows", fmt.Sprintf(`[{"id":"r%d","v":%d}]`, i, i), nil)
		var fl struct {
			Sealed bool `json:"sealed"`
		}
		a.must(200, "POST", "/api/v1/stores/generic/"+name+"/flush", nil, &fl)
		if !fl.Sealed {
			a.t.Fatalf("flush of generic:%s sealed nothing", name)
		}
	}
}

// pending is generic store name's pending generations over every shard.
func (a api) pending(name string) int {
	a.t.Helper()
	var st httpStats
	a.must(200, "GET", "/api/v1/stores/generic/"+name+"/stats", nil, &st)
	return st.pending()
}

// scrapeMetric is the value of the first series of metric on the /metrics of the worker at
// addr that has every label of labels (name, value pairs); -1 when there is none.
func scrapeMetric(addr, metric string, labels ...string) (float64, error) {
	fams, err := promtext.Scrape(context.Background(), "http://"+addr+"/metrics")
	if err != nil {
		return 0, err
	}
	if v, ok := promtext.Value(fams[metric], labels...); ok {
		return v, nil
	}
	return -1, nil
}

// metricValue is scrapeMetric that fails t when /metrics cannot be read.
func metricValue(t *testing.T, addr, metric string, labels ...string) float64 {
	t.Helper()
	v, err := scrapeMetric(addr, metric, labels...)
	require.NoError(t, err, "%s at %s", metric, addr)
	return v
}

// httpStats is the stats answer (docs/API.md).
type httpStats struct {
	Target      string `json:"target"`
	BaseVersion uint64 `json:"base_version"`
	Runs        int    `json:"runs"`
	Rows        int64  `json:"rows"`
	Totals      struct {
		PendingGenerations int `json:"pending_generations"`
	} `json:"totals"`
	Shards []struct {
		Shard              string `json:"shard"`
		PendingGenerations int    `json:"pending_generations"`
		Watermark          uint64 `json:"watermark"`
	} `json:"shards"` // the first page
}

// pending is the store's pending generations over every shard, listed on the page or not.
func (s httpStats) pending() int { return s.Totals.PendingGenerations }

// --- Temporal ----------------------------------------------------------------------------

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mergeResult waits for run's MergeWal result.
func (e *env) mergeResult(run client.WorkflowRun, timeout time.Duration) contract.MergeWalResult {
	e.t.Helper()
	var res contract.MergeWalResult
	if err := run.Get(e.ctx(timeout), &res); err != nil {
		e.t.Fatalf("MergeWal %s (run %s): %v", run.GetID(), run.GetRunID(), err)
	}
	return res
}

func (e *env) startMerge(target string, in contract.MergeWalInput) client.WorkflowRun {
	e.t.Helper()
	run, err := e.startMergeWal(mustTarget(e.t, target), in)
	if err != nil {
		e.t.Fatalf("start MergeWal %s: %v", target, err)
	}
	return run
}

// execute starts a run of workflowType under id with input on the shared queue.
func (e *env) execute(id, workflowType string, input any) client.WorkflowRun {
	e.t.Helper()
	run, err := e.c.ExecuteWorkflow(e.ctx(waitShort), client.StartWorkflowOptions{ID: id, TaskQueue: contract.TaskQueue}, workflowType, input)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// sweep runs a MaintenanceSweep under id with in and returns its result and its run.
func (e *env) sweep(id string, in contract.MaintenanceSweepInput) (contract.MaintenanceSweepResult, client.WorkflowRun) {
	e.t.Helper()
	run := e.execute(id, contract.MaintenanceSweepWorkflow, in)
	var res contract.MaintenanceSweepResult
	if err := run.Get(e.ctx(waitLong), &res); err != nil {
		e.t.Fatalf("sweep %s: %v", id, err)
	}
	return res, run
}

// startMergeWal starts tg's MergeWal as contract.StartMergeWal does, again after an answer
// that a loaded server gave too late.
func (e *env) startMergeWal(tg store.Target, in contract.MergeWalInput) (client.WorkflowRun, error) {
	var run client.WorkflowRun
	err := testtemporal.RetryTimedOut(e.ctx(waitShort), func(ctx context.Context) error {
		var err error
		run, err = contract.StartMergeWal(ctx, e.c, tg, in)
		return err
	})
	return run, err
}

// history returns the events of run id/runID (runID "" = the latest run), failing t if it
// cannot read them.
func (e *env) history(t *testing.T, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	events, err := actioncount.History(e.ctx(waitShort), e.c, id, runID)
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	return events
}

// closeEvent is the event that closed run id/runID.
func (e *env) closeEvent(t *testing.T, id, runID string) *historypb.HistoryEvent {
	t.Helper()
	ev, err := e.c.GetWorkflowHistory(e.ctx(waitShort), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT).Next()
	if err != nil {
		t.Fatalf("close event of %s: %v", id, err)
	}
	return ev
}

// describe returns the workflow's current execution description.
func (e *env) describe(id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	var d *workflowservice.DescribeWorkflowExecutionResponse
	err := testtemporal.RetryTimedOut(ctx, func(ctx context.Context) error {
		var err error
		d, err = e.c.DescribeWorkflowExecution(ctx, id, runID)
		return err
	})
	return d, err
}

func (e *env) isRunning(id, runID string) bool {
	e.t.Helper()
	d, err := e.describe(id, runID)
	if err != nil {
		e.t.Fatal(err)
	}
	return d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// pendingActivity reports whether the workflow has activity typ scheduled (and, if started,
// picked up by a worker) and not finished.
func (e *env) pendingActivity(id, runID, typ string, started bool) (bool, error) {
	d, err := e.describe(id, runID)
	if err != nil {
		return false, err
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == typ && (!started || pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED) {
			return true, nil
		}
	}
	return false, nil
}

// listExecutions lists the executions matching a visibility query.
func (e *env) listExecutions(query string) ([]*workflowservice.ListWorkflowExecutionsResponse, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	var pages []*workflowservice.ListWorkflowExecutionsResponse
	n := 0
	var token []byte
	for {
		var res *workflowservice.ListWorkflowExecutionsResponse
		err := testtemporal.RetryTimedOut(ctx, func(ctx context.Context) error {
			var err error
			res, err = e.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: e.ns, Query: query, NextPageToken: token,
			})
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		pages = append(pages, res)
		n += len(res.Executions)
		token = res.NextPageToken
		if len(token) == 0 {
			return pages, n, nil
		}
	}
}

func ptr[T any](v T) *T { return &v }

// logHistory logs the run's event types and times (diagnostics for slow or stuck runs).
func (e *env) logHistory(id, runID string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	it := e.c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var b strings.Builder
	var first time.Time
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Logf("history of %s: %v", id, err)
			return
		}
		at := ev.GetEventTime().AsTime()
		if first.IsZero() {
			first = at
		}
		fmt.Fprintf(&b, "\n  %3d +%-8s %s", ev.GetEventId(), at.Sub(first).Round(time.Millisecond), ev.GetEventType())
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			fmt.Fprintf(&b, " %s: %s", f.GetCause(), f.GetFailure().GetMessage())
		}
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			fmt.Fprintf(&b, " by %s", a.GetIdentity())
		}
		if f := ev.GetWorkflowTaskTimedOutEventAttributes(); f != nil {
			fmt.Fprintf(&b, " %s", f.GetTimeoutType())
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			fmt.Fprintf(&b, " attempt %d", a.GetAttempt())
		}
	}
	e.t.Logf("history of %s/%s:%s", id, runID, b.String())
}

// runCLI runs the walkeeper binary and returns its output and exit status.
func runCLI(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run %s %v: %v", bin, args, err)
		return "", "", -1
	}
}
