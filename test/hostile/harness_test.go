package hostile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/internal/testkit/promtext"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// memorySlack is what a worker may use beyond the sum of its budgets: the Go runtime, the
// Temporal SDK's workers and caches, HTTP buffers, and what bodies and pages take as Go values
// beyond the JSON text their budgets count. An idle worker peaks at about 100 MiB, so a peak
// above budgets + slack means something was materialised outside every budget.
const memorySlack = 256 * mib

// watchdogKill is the resident size at which the harness kills a worker: far above every
// bound the tests assert, it only keeps a worker that materialises gigabytes (the bug some
// tests provoke on an unfixed build) from taking the shared machine down with it.
const watchdogKill = 2 * gib

// workerConfig is one worker's settings. The budgets are always set, since the memory bound is
// computed from them; Knobs adds or overrides any other knob by flag name.
type workerConfig struct {
	CacheBytes, ReadBudgetBytes, MergeBudgetBytes, MemtableBytes int64
	BodyBudgetBytes, PageBudgetBytes                             int64
	Knobs                                                        map[string]string
}

// defaultConfig: small budgets, nothing running in the background (no flush sweeper, sweep,
// reconcile or count trigger), so a storage listing changes only through the test's requests.
func defaultConfig() workerConfig {
	return workerConfig{CacheBytes: 64 * mib, ReadBudgetBytes: 64 * mib, MergeBudgetBytes: 256 * mib, MemtableBytes: 64 * mib,
		BodyBudgetBytes: 32 * mib, PageBudgetBytes: 32 * mib}
}

// memoryBound is the peak RSS the worker may reach: the sum of its budgets plus memorySlack.
func (c workerConfig) memoryBound() int64 {
	return c.CacheBytes + c.ReadBudgetBytes + c.MergeBudgetBytes + c.MemtableBytes + c.BodyBudgetBytes + c.PageBudgetBytes + memorySlack
}

// envOnlyKnobs are the knobs of the hostile-input contract. They go through WALKEEPER_*
// variables (see doc.go): an older build ignores them and still starts.
var envOnlyKnobs = map[string]bool{
	"memtable-bytes": true, "max-append-rows": true, "page-bytes": true, "max-connections": true,
	"http-read-timeout": true, "http-write-timeout": true, "resident-stores-max": true, "resident-idle": true,
	"body-budget-bytes": true, "page-budget-bytes": true,
}

func (c workerConfig) knobs() map[string]string {
	k := map[string]string{
		"flush-interval": "0", "sweep-interval": "0", "reconcile-interval": "0", "merge-after-generations": "0",
		"log-format": "json", "log-level": "info", "shutdown-timeout": "15s", "temporal-wait": "2m",
		"cache-bytes":        strconv.FormatInt(c.CacheBytes, 10),
		"read-budget-bytes":  strconv.FormatInt(c.ReadBudgetBytes, 10),
		"merge-budget-bytes": strconv.FormatInt(c.MergeBudgetBytes, 10),
		"memtable-bytes":     strconv.FormatInt(c.MemtableBytes, 10),
		"body-budget-bytes":  strconv.FormatInt(c.BodyBudgetBytes, 10),
		"page-budget-bytes":  strconv.FormatInt(c.PageBudgetBytes, 10),
	}
	for n, v := range c.Knobs {
		k[n] = v
	}
	return k
}

// worker is one `walkeeper worker` process on its own file:// root and namespace.
type worker struct {
	cfg     workerConfig
	ns      string
	root    string // the storage root directory (file://root)
	listen  string
	logPath string
	shard   string // from /healthz
	proc    *walkeeperproc.Worker
	client  *http.Client

	peakKB   atomic.Int64 // highest VmHWM the watchdog read
	killedKB atomic.Int64 // VmRSS at which the watchdog killed the process (0 = it did not)
}

var safeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// startWorker starts a worker for t (a namespace of its own, a free port on 127.0.0.1) and
// waits until /healthz answers. When the test ends, checkAliveAndBounded asserts that the
// worker is still running within its memory bound, and the worker is stopped.
func startWorker(t *testing.T, cfg workerConfig) *worker {
	t.Helper()
	ns := suite.Namespace(t)
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	name := safeChars.ReplaceAllString(t.Name(), "_")
	w := &worker{
		cfg: cfg, ns: ns,
		root:    filepath.Join(t.TempDir(), "storage"),
		logPath: suite.LogPath(name),
		// No keep-alive: every request is its own connection, so the connection tests count
		// only the connections they open themselves.
		client: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--storage", "file://" + w.root, "--temporal", suite.HostPort(), "--namespace", w.ns}
	knobs := cfg.knobs()
	var knobEnv []string
	for _, n := range slices.Sorted(maps.Keys(knobs)) {
		if envOnlyKnobs[n] {
			knobEnv = append(knobEnv, "WALKEEPER_"+strings.ToUpper(strings.ReplaceAll(n, "-", "_"))+"="+knobs[n])
		} else {
			args = append(args, "--"+n, knobs[n])
		}
	}
	// The log starts afresh with the knobs set through the environment; the process's own
	// header, appended below it, names the arguments.
	if err := os.WriteFile(w.logPath, []byte("# env: "+strings.Join(knobEnv, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Registered first so that it runs last, after the alive and memory checks.
	suite.KeepLogsIfFailed(t, w.logPath)
	// The worker reads every WALKEEPER_* variable; only the harness's own may reach it.
	w.proc = &walkeeperproc.Worker{Bin: bin, Instance: "hostile-" + name, Log: w.logPath,
		Args: args, Env: knobEnv, OwnWalkeeperEnv: true}
	w.proc.Start(t)
	w.listen = w.proc.Listen
	go w.watchdog()
	t.Cleanup(func() {
		w.checkAliveAndBounded(t)
		w.stop()
	})
	var h struct{ Shard string }
	if err := json.Unmarshal(w.mustOK(t, http.MethodGet, "/healthz", nil).Body, &h); err != nil {
		t.Fatal(err)
	}
	w.shard = h.Shard
	return w
}

// pid is the worker's process id.
func (w *worker) pid() int { return w.proc.Pid() }

func (w *worker) alive() bool {
	select {
	case <-w.proc.Exited():
		return false
	default:
		return true
	}
}

// stop ends the worker gracefully (SIGTERM), killing it if it does not exit in time.
func (w *worker) stop() { _, _ = w.proc.Stop(30 * time.Second) }

// watchdog records the peak RSS while the worker runs and kills it beyond watchdogKill.
func (w *worker) watchdog() {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.proc.Exited():
			return
		case <-tick.C:
		}
		st, err := procStatus(w.pid())
		if err != nil {
			continue
		}
		if hwm := st["VmHWM"]; hwm > w.peakKB.Load() {
			w.peakKB.Store(hwm)
		}
		if rss := st["VmRSS"]; rss*kib > watchdogKill {
			w.killedKB.Store(rss)
			w.proc.Kill()
			return
		}
	}
}

// procStatus reads the kB fields of /proc/<pid>/status (VmHWM, VmRSS, ...).
func procStatus(pid int) (map[string]int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == "kB" {
			if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[name] = v
			}
		}
	}
	return out, nil
}

// peakRSS is the worker's peak resident size in bytes: VmHWM now, or the last the watchdog
// read if the process is gone.
func (w *worker) peakRSS() int64 {
	if w.alive() {
		if st, err := procStatus(w.pid()); err == nil && st["VmHWM"] > w.peakKB.Load() {
			w.peakKB.Store(st["VmHWM"])
		}
	}
	return w.peakKB.Load() * kib
}

// checkAliveAndBounded asserts that the worker is still running and that its peak RSS stayed
// below its memory bound (workerConfig.memoryBound).
func (w *worker) checkAliveAndBounded(t *testing.T) {
	t.Helper()
	peak, bound := w.peakRSS(), w.cfg.memoryBound()
	t.Logf("worker peak RSS %d MiB (bound %d MiB = budgets + %d MiB slack)", peak/mib, bound/mib, memorySlack/mib)
	if k := w.killedKB.Load(); k > 0 {
		t.Errorf("the harness killed the worker at %d MiB resident (limit %d MiB): it materialised far beyond its budgets", k/1024, watchdogKill/mib)
	} else if !w.alive() {
		t.Errorf("the worker process exited (crashed?); output:\n%s", w.proc.Output())
	}
	if peak > bound {
		t.Errorf("worker peak RSS %d MiB is above its bound %d MiB (cache %d + read %d + merge %d + memtable %d + bodies %d + pages %d + slack %d MiB)",
			peak/mib, bound/mib, w.cfg.CacheBytes/mib, w.cfg.ReadBudgetBytes/mib, w.cfg.MergeBudgetBytes/mib, w.cfg.MemtableBytes/mib,
			w.cfg.BodyBudgetBytes/mib, w.cfg.PageBudgetBytes/mib, memorySlack/mib)
	}
}

// --- HTTP --------------------------------------------------------------------------------

// reply is one whole HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// errorFields are the stable code and the human-readable message of an error answer, in
// either shape: {"code": ..., "error": "message"} or {"error": {"code": ..., "message": ...}}.
func (r reply) errorFields() (code, message string) {
	var flat struct {
		Code  string          `json:"code"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(r.Body, &flat) != nil {
		return "", ""
	}
	if json.Unmarshal(flat.Error, &message) == nil {
		return flat.Code, message
	}
	var nested struct{ Code, Message string }
	_ = json.Unmarshal(flat.Error, &nested)
	return cmp.Or(flat.Code, nested.Code), nested.Message
}

func (r reply) code() string { c, _ := r.errorFields(); return c }

func (r reply) String() string {
	b := r.Body
	if len(b) > 600 {
		b = append(append([]byte(nil), b[:600]...), "…"...)
	}
	return fmt.Sprintf("%d %s", r.Status, b)
}

func (w *worker) url(path string) string { return "http://" + w.listen + path }

// do sends one request. body nil = none; a non-nil body is sent as application/json unless
// hdr sets a Content-Type. hdr "Host" sets the Host header.
func (w *worker) do(method, path string, body []byte, hdr map[string]string) (reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, w.url(path), rd)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := w.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading the answer: %w", method, shorten(path), err)
	}
	return reply{Status: res.StatusCode, Header: res.Header, Body: raw}, nil
}

// call is do that fails the test when no answer came (the worker may have died).
func (w *worker) call(t *testing.T, method, path string, body []byte, hdr map[string]string) reply {
	t.Helper()
	r, err := w.do(method, path, body, hdr)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v (worker alive: %v)\noutput:\n%s", method, shorten(path), err, w.alive(), w.proc.Output())
	}
	return r
}

// mustOK is call that requires a 2xx answer.
func (w *worker) mustOK(t *testing.T, method, path string, body []byte) reply {
	t.Helper()
	r := w.call(t, method, path, body, nil)
	if r.Status/100 != 2 {
		t.Fatalf("%s %s: %s", method, shorten(path), r)
	}
	return r
}

// doAll sends n requests at once, request i through req(i), and returns their answers.
func doAll(n int, req func(i int) (reply, error)) ([]reply, []error) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	replies, errs := make([]reply, n), make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			replies[i], errs[i] = req(i)
		}()
	}
	close(release)
	wg.Wait()
	return replies, errs
}

// eachPage GETs path, then path with after=<next> while a page names a next cursor, and hands
// each 200 answer to page; more than maxPages pages fail t, as does any other answer.
func (w *worker) eachPage(t *testing.T, path string, maxPages int, page func(n int, r reply)) {
	t.Helper()
	after := ""
	for n := 1; n <= maxPages; n++ {
		p := path
		if after != "" {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			p += sep + "after=" + url.QueryEscape(after)
		}
		r := w.mustOK(t, http.MethodGet, p, nil)
		page(n, r)
		var next struct{ Next string }
		if err := json.Unmarshal(r.Body, &next); err != nil {
			t.Fatalf("GET %s: %v", shorten(p), err)
		}
		if next.Next == "" {
			return
		}
		after = next.Next
	}
	t.Fatalf("GET %s: more than %d pages: the cursor does not advance", shorten(path), maxPages)
}

// expectError asserts status and code; it reports (not fails) so one test lists every answer.
func expectError(t *testing.T, r reply, status int, code, what string) bool {
	t.Helper()
	if r.Status != status || r.code() != code {
		t.Errorf("%s: got %s, want %d %s", what, r, status, code)
		return false
	}
	return true
}

func shorten(s string) string {
	if len(s) > 160 {
		return fmt.Sprintf("%s…(%d bytes)", s[:160], len(s))
	}
	return s
}

// jsonBody encodes v as compact JSON without HTML escaping (a "<" stays one byte).
func jsonBody(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// field is one schema field of a store-create body.
type field struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable,omitempty"`
}

// idField is the key every generic store has.
var idField = field{Name: "id", Type: "string"}

// createGeneric creates generic store name with fields (and more members of the body).
func (w *worker) createGeneric(t *testing.T, name string, fields []field, more map[string]any) {
	t.Helper()
	body := map[string]any{"fields": fields}
	for k, v := range more {
		body[k] = v
	}
	w.mustOK(t, http.MethodPost, "/api/v1/stores/generic/"+name, jsonBody(t, body))
}

// rowsPath is the rows route of generic store name.
func rowsPath(name string) string { return "/api/v1/stores/generic/" + name + "/rows" }

// stats reads a store's stats (status and body).
type storeStats struct {
	Totals struct {
		PendingGenerations int `json:"pending_generations"`
	} `json:"totals"` // over every shard, however many a page lists
}

func (w *worker) pendingGenerations(t *testing.T, name string) int {
	t.Helper()
	r := w.mustOK(t, http.MethodGet, "/api/v1/stores/generic/"+name+"/stats", nil)
	var st storeStats
	if err := json.Unmarshal(r.Body, &st); err != nil {
		t.Fatalf("stats of %s: %v: %s", name, err, r)
	}
	return st.Totals.PendingGenerations
}

// metricSum is the sum of every series of a metric family on /metrics (0 when absent).
func (w *worker) metricSum(t *testing.T, family string) float64 {
	t.Helper()
	fams, err := promtext.Scrape(context.Background(), w.url("/metrics"))
	require.NoError(t, err)
	return promtext.Sum(fams[family])
}

// --- storage root ------------------------------------------------------------------------

// listing maps every object under the storage root to its size.
type listing map[string]int64

func (w *worker) listing(t *testing.T) listing {
	t.Helper()
	out := listing{}
	err := filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (a temporary file)
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(w.root, p)
		out[filepath.ToSlash(rel)] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diff lists what changed from a to b.
func (a listing) diff(b listing) []string {
	var out []string
	for k, v := range b {
		if old, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("+ %s (%d bytes)", k, v))
		} else if old != v {
			out = append(out, fmt.Sprintf("~ %s (%d -> %d bytes)", k, old, v))
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "- "+k)
		}
	}
	sort.Strings(out)
	return out
}

// checkNothingWritten asserts that the storage root is as it was in before, objects whose
// keys start with one of except aside.
func (w *worker) checkNothingWritten(t *testing.T, before listing, what string, except ...string) {
	t.Helper()
	after := w.listing(t)
	maps.DeleteFunc(after, func(k string, _ int64) bool {
		return slices.ContainsFunc(except, func(p string) bool { return strings.HasPrefix(k, p) })
	})
	if d := before.diff(after); len(d) > 0 {
		if len(d) > 20 {
			d = append(d[:20], fmt.Sprintf("… and %d more", len(d)-20))
		}
		t.Errorf("%s wrote to the storage root:\n  %s", what, strings.Join(d, "\n  "))
	}
}

// writeObject puts a file under the storage root, as another program would.
func (w *worker) writeObject(t *testing.T, key string, data []byte) {
	t.Helper()
	p := filepath.Join(w.root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// --- Temporal ------------------------------------------------------------------------------

// temporalClient is a client of the worker's namespace, closed when the test ends.
func (w *worker) temporalClient(t *testing.T) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  suite.HostPort(),
		Namespace: w.ns,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
