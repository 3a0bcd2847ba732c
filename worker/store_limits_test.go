package worker

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The store's append and key limits answer with their own stable codes, and nothing of a
// refused append is written.
func TestHTTPAppendAndKeyLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxAppendRows = 3
	cfg.MemtableBytes = 4 << 10
	_, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	rows := "/api/v1/stores/generic/gs/rows"

	expect(t, c.postJSON(rows, `[{"id":"a"},{"id":"b"},{"id":"c"},{"id":"d"}]`), http.StatusRequestEntityTooLarge, CodeAppendTooLarge)
	big := strings.Repeat("x", 5000)
	expect(t, c.postJSON(rows, `[{"id":"e","s":"`+big+`"}]`), http.StatusRequestEntityTooLarge, CodeAppendTooLarge)
	expect(t, c.get(rows+"/a"), http.StatusNotFound, CodeRowNotFound)

	long := strings.Repeat("k", 1025)
	expect(t, c.postJSON(rows, `[{"id":"`+long+`"}]`), http.StatusBadRequest, CodeKeyTooLong)
	expect(t, c.get(rows+"/"+long), http.StatusBadRequest, CodeKeyTooLong)
	expect(t, c.do(http.MethodDelete, rows+"/"+long, "", nil), http.StatusBadRequest, CodeKeyTooLong)
	expect(t, c.get(rows+"?after="+url.QueryEscape(long)), http.StatusBadRequest, CodeKeyTooLong)

	expect(t, c.postJSON(rows, `[{"id":"a"},{"id":"b"},{"id":"c"}]`), http.StatusOK, "")
	ok := strings.Repeat("k", 1024)
	expect(t, c.postJSON(rows, `[{"id":"`+ok+`"}]`), http.StatusOK, "")
	expect(t, c.get(rows+"/"+ok), http.StatusOK, "")
}

// Deletes are writes: a shard at --pending-max refuses them like appends.
func TestHTTPDeleteRefusedOverPendingLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.PendingWarn = 0
	cfg.PendingMax = 1
	_, c, rs := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	c.sealGS(t, `[{"id":"r0"}]`)
	r := c.do(http.MethodDelete, "/api/v1/stores/generic/gs/rows/r0", "", nil)
	expect(t, r, http.StatusServiceUnavailable, CodeTooManyPending)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 too_many_pending without Retry-After")
	}
	expect(t, c.get("/api/v1/stores/generic/gs/rows/r0"), http.StatusOK, "")
	// As for a refused append, the worker asks for the merge that makes room.
	deadline := time.Now().Add(5 * time.Second)
	for rs.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := rs.count(); n != 1 {
		t.Fatalf("debt merge starts = %d, want 1", n)
	}
}
