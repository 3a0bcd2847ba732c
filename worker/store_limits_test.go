package worker

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
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
