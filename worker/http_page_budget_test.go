package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
)

// free reports whether n bytes of b are free, taking none of them.
func (b *byteBudget) free(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.sem.Release(n)
	return true
}

// stalledWriter is the answer of a client that stops reading: its first Write blocks until
// unblock is closed, then every Write fails as if the client had gone away.
type stalledWriter struct {
	header  http.Header
	writing chan struct{} // closed at the first Write
	unblock chan struct{}
}

func (s *stalledWriter) Header() http.Header { return s.header }
func (s *stalledWriter) WriteHeader(int)     {}
func (s *stalledWriter) Write([]byte) (int, error) {
	select {
	case <-s.writing:
	default:
		close(s.writing)
	}
	<-s.unblock
	return 0, io.ErrClosedPipe
}

// List pages share --page-budget-bytes: while a rows page whose client stopped reading holds all
// of it, other rows and stores listings wait briefly and get 503 budget_busy with Retry-After,
// and once that client is gone the bytes are free again and listings work.
func TestHTTPListPagesShareThePageBudget(t *testing.T) {
	defer func(d time.Duration) { budgetWait = d }(budgetWait)
	budgetWait = 100 * time.Millisecond
	cfg := testConfig(t)
	cfg.PageBytes, cfg.MaxRowBytes = 1024, 1024
	cfg.PageBudgetBytes = cfg.PageBytes + int64(cfg.MaxRowBytes) // one rows page of 100 rows
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"},{"id":"b"}]`), http.StatusOK, "")
	rows := "/api/v1/stores/generic/gs/rows"
	free := func() bool { return w.api.pages.free(cfg.PageBudgetBytes) }
	require.True(t, free(), "answered pages give their bytes back")

	stalled := &stalledWriter{header: http.Header{}, writing: make(chan struct{}), unblock: make(chan struct{})}
	unblock := sync.OnceFunc(func() { close(stalled.unblock) })
	defer unblock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.api.mux.ServeHTTP(stalled, httptest.NewRequest(http.MethodGet, rows, nil))
	}()
	<-stalled.writing
	require.False(t, free(), "the stalled page holds the whole budget")

	for _, path := range []string{rows, rows + "?limit=1", "/api/v1/stores"} {
		r := c.get(path)
		expect(t, r, http.StatusServiceUnavailable, CodeBudgetBusy)
		require.NotEmpty(t, r.header.Get("Retry-After"), path)
	}

	unblock()
	<-done
	require.True(t, free(), "a page whose client went away gives its bytes back")
	r := c.get(rows)
	expect(t, r, http.StatusOK, "")
	require.JSONEq(t, `{"rows":[{"id":"a","n":null,"s":null},{"id":"b","n":null,"s":null}],"next":""}`, string(r.body))
	expect(t, c.get("/api/v1/stores"), http.StatusOK, "")
	require.True(t, free(), "answered pages give their bytes back")
}

// A rows page is charged what it can hold: --page-bytes plus one row, or ?limit= rows when they
// are less; without a row cap there is no row to count.
func TestRowsPageBytes(t *testing.T) {
	c := DefaultConfig()
	c.PageBytes, c.MaxRowBytes = 4<<20, 1<<20
	require.Equal(t, int64(5<<20), c.rowsPageBytes(maxListLimit))
	require.Equal(t, int64(5<<20), c.rowsPageBytes(5))
	require.Equal(t, int64(2<<20), c.rowsPageBytes(2))
	c.MaxRowBytes = 0
	require.Equal(t, int64(4<<20), c.rowsPageBytes(1))
}

// A stores page is charged what its listing can hold: --page-bytes plus one entry, or ?limit=
// entries when they are less.
func TestStoresPageBytes(t *testing.T) {
	c := DefaultConfig()
	c.PageBytes = 4 << 20
	require.Equal(t, int64(maxStoresLimit*store.MaxStoreInfoJSONBytes), c.storesPageBytes(maxStoresLimit))
	require.Equal(t, int64(3*store.MaxStoreInfoJSONBytes), c.storesPageBytes(3))
	c.PageBytes = 1000
	require.Equal(t, int64(1000+store.MaxStoreInfoJSONBytes), c.storesPageBytes(maxStoresLimit))
}

// A HEAD of a list route answers what its GET would (status, JSON headers, no body) from a read
// of one item, and so takes one item from the page budget: while the budget has room for one
// item but not for a page, HEADs answer 200 and GETs 503 budget_busy. Its errors are the GET's.
func TestHTTPHeadOfAListReadsOneItem(t *testing.T) {
	defer func(d time.Duration) { budgetWait = d }(budgetWait)
	budgetWait = 100 * time.Millisecond
	cfg := testConfig(t)
	cfg.PageBytes, cfg.MaxRowBytes = 4096, 1024
	cfg.PageBudgetBytes = cfg.PageBytes + int64(cfg.MaxRowBytes)
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"},{"id":"b"},{"id":"c"}]`), http.StatusOK, "")
	rows := "/api/v1/stores/generic/gs/rows"

	held := cfg.PageBudgetBytes - max(cfg.rowsPageBytes(1), cfg.storesPageBytes(1))
	require.True(t, w.api.pages.sem.TryAcquire(held))
	for _, path := range []string{rows, rows + "?limit=10000&source=base", "/api/v1/stores", "/api/v1/stores?limit=1000"} {
		r := c.do(http.MethodHead, path, "", nil)
		require.Equal(t, http.StatusOK, r.status, path)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), path)
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), path)
		require.Empty(t, r.body, path)
	}
	expect(t, c.get(rows+"?limit=10"), http.StatusServiceUnavailable, CodeBudgetBusy)
	expect(t, c.get("/api/v1/stores"), http.StatusServiceUnavailable, CodeBudgetBusy)
	w.api.pages.sem.Release(held)

	for path, status := range map[string]int{
		"/api/v1/stores/generic/nope/rows": http.StatusNotFound,
		rows + "?limit=0":                  http.StatusBadRequest,
		rows + "?source=x":                 http.StatusBadRequest,
		"/api/v1/stores?kind=x":            http.StatusBadRequest,
	} {
		r := c.do(http.MethodHead, path, "", nil)
		require.Equal(t, status, r.status, path)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), path)
		require.Empty(t, r.body, path)
	}
	require.True(t, w.api.pages.free(cfg.PageBudgetBytes), "HEADs give their bytes back")
}

// A row read by key takes one row of --max-row-bytes from the page budget, as a page of one
// row does, until its answer is written: --max-connections clients each reading a row of the
// largest size held that many rows outside every budget.
func TestHTTPRowGetsShareThePageBudget(t *testing.T) {
	defer func(d time.Duration) { budgetWait = d }(budgetWait)
	budgetWait = 100 * time.Millisecond
	cfg := testConfig(t)
	cfg.PageBytes, cfg.MaxRowBytes = 1024, 1024
	cfg.PageBudgetBytes = cfg.PageBytes + int64(cfg.MaxRowBytes)
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"}]`), http.StatusOK, "")
	row := "/api/v1/stores/generic/gs/rows/a"

	require.True(t, w.api.pages.sem.TryAcquire(cfg.PageBudgetBytes-int64(cfg.MaxRowBytes)+1), "other pages hold all but less than a row")
	r := c.get(row)
	expect(t, r, http.StatusServiceUnavailable, CodeBudgetBusy)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	w.api.pages.sem.Release(cfg.PageBudgetBytes - int64(cfg.MaxRowBytes) + 1)

	r = c.get(row)
	expect(t, r, http.StatusOK, "")
	require.JSONEq(t, `{"id":"a","n":null,"s":null}`, string(r.body))
	expect(t, c.get("/api/v1/stores/generic/gs/rows/zz"), http.StatusNotFound, CodeRowNotFound)
	require.True(t, w.api.pages.free(cfg.PageBudgetBytes), "answered rows give their bytes back")
}
