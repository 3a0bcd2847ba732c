package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// rowsPage is one decoded answer of GET .../rows.
type rowsPage struct {
	Rows []map[string]any `json:"rows"`
	Next *string          `json:"next"`
}

func decodeRowsPage(t *testing.T, r resp) rowsPage {
	t.Helper()
	var p rowsPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("rows page is not JSON: %v: %.200s", err, r.body)
	}
	if p.Next == nil {
		t.Fatalf("rows page without next: %.200s", r.body)
	}
	return p
}

// rowPages follows next from GET .../gs/rows?limit=10000&after= until it is empty and returns
// the pages and each answer's bytes; a page that is empty, over most bytes, escapes HTML, or
// whose next is not its last row fails t, as does paging past maxPages.
func (c *apiClient) rowPages(t *testing.T, most int64, maxPages int) (pages []rowsPage, sizes []int) {
	t.Helper()
	for after := ""; ; {
		r := c.get("/api/v1/stores/generic/gs/rows?limit=10000&after=" + url.QueryEscape(after))
		expect(t, r, http.StatusOK, "")
		p := decodeRowsPage(t, r)
		if int64(len(r.body)) > most || len(p.Rows) == 0 || strings.Contains(string(r.body), `\u003c`) {
			t.Fatalf("page %d: %d rows in %d bytes, --page-bytes %d: %.200s", len(pages), len(p.Rows), len(r.body), most, r.body)
		}
		if last := p.Rows[len(p.Rows)-1]["id"]; *p.Next != "" && *p.Next != last {
			t.Fatalf("page %d: next %q is not its last row %q", len(pages), *p.Next, last)
		}
		pages, sizes = append(pages, p), append(sizes, len(r.body))
		if after = *p.Next; after == "" {
			return pages, sizes
		}
		if len(pages) > maxPages {
			t.Fatal("paging does not end")
		}
	}
}

// requireIDs fails t unless pages hold want rows, named by format of 0, 1, … in order.
func requireIDs(t *testing.T, pages []rowsPage, want int, format string) {
	t.Helper()
	var got []string
	for _, p := range pages {
		for _, row := range p.Rows {
			got = append(got, row["id"].(string))
		}
	}
	if len(got) != want {
		t.Fatalf("listed %d rows in %d pages, want %d", len(got), len(pages), want)
	}
	for i, id := range got {
		if w := fmt.Sprintf(format, i); id != w {
			t.Fatalf("row %d is %s, want %s (order or a repeat)", i, id, w)
		}
	}
}

// A rows page stops before its answer passes --page-bytes, always holds one row, and its next
// continues exactly after the last row sent: paging by bytes loses and repeats nothing. Rows
// are sent as they are, '<' included (no HTML escaping).
func TestListRowsPageBytes(t *testing.T) {
	cfg := testConfig(t)
	cfg.PageBytes = 4 << 10
	_, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	text := strings.Repeat("<b>", 300) // 900 bytes, 5400 if escaped
	var rows []string
	for i := range 40 {
		rows = append(rows, fmt.Sprintf(`{"id":"r%02d","s":"%s"}`, i, text))
	}
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", "["+strings.Join(rows, ",")+"]"), http.StatusOK, "")
	if r := c.get("/api/v1/stores/generic/gs/rows?limit=1"); !strings.Contains(string(r.body), text) {
		t.Fatalf("a row is not sent as it is: %.200s", r.body)
	}
	pages, _ := c.rowPages(t, cfg.PageBytes, 40)
	requireIDs(t, pages, 40, "r%02d")
	if len(pages) < 10 {
		t.Fatalf("40 rows in %d pages, want >= 10 pages of 4 KiB", len(pages))
	}

	// The row limit still applies, and a row larger than the page bound comes alone.
	p := decodeRowsPage(t, c.get("/api/v1/stores/generic/gs/rows?limit=2"))
	if len(p.Rows) != 2 || *p.Next != "r01" {
		t.Fatalf("limit=2: %d rows, next %q", len(p.Rows), *p.Next)
	}
	big := strings.Repeat("x", 6<<10)
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a-big","s":"`+big+`"}]`), http.StatusOK, "")
	p = decodeRowsPage(t, c.get("/api/v1/stores/generic/gs/rows"))
	if len(p.Rows) != 1 || p.Rows[0]["id"] != "a-big" || *p.Next != "a-big" {
		t.Fatalf("a row over the page bound: %d rows, next %q", len(p.Rows), *p.Next)
	}
	// An empty store answers an empty page.
	expect(t, c.postJSON("/api/v1/stores/generic/empty", genericSchema), http.StatusCreated, "")
	if r := c.get("/api/v1/stores/generic/empty/rows"); string(r.body) != `{"rows":[],"next":""}`+"\n" {
		t.Fatalf("empty page = %q", r.body)
	}
}

// Small rows before large ones: each page is read in one store listing bounded by
// --page-bytes, and still fills up: the row after a page's last would not have fit in it
// (the keys are of one length, so the page's "next" is as long either way).
func TestListRowsPageBytesMixedSizes(t *testing.T) {
	cfg := testConfig(t)
	cfg.PageBytes = 8 << 10
	_, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	var rows []string
	for i := range 140 {
		s := "small"
		if i >= 100 {
			s = strings.Repeat("x", 1<<10)
		}
		rows = append(rows, fmt.Sprintf(`{"id":"r%03d","s":"%s"}`, i, s))
	}
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", "["+strings.Join(rows, ",")+"]"), http.StatusOK, "")

	pages, sizes := c.rowPages(t, cfg.PageBytes, len(rows))
	for i, p := range pages[:len(pages)-1] {
		next, err := json.Marshal(pages[i+1].Rows[0])
		if err != nil {
			t.Fatal(err)
		}
		if int64(sizes[i]+1+len(next)) <= cfg.PageBytes {
			t.Errorf("page %d (%d rows, %d bytes) ends though its next row (%d bytes) fits", i, len(p.Rows), sizes[i], len(next))
		}
	}
	requireIDs(t, pages, len(rows), "r%03d")
}

// With small rows and a large limit a page is complete (limit rows, next set), and the last
// page ends with next "".
func TestListRowsLimit(t *testing.T) {
	_, c, _ := serveAPI(t, testConfig(t))
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	var rows []string
	for i := range 350 {
		rows = append(rows, fmt.Sprintf(`{"id":"k%03d","n":%d}`, i, i))
	}
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", "["+strings.Join(rows, ",")+"]"), http.StatusOK, "")
	p := decodeRowsPage(t, c.get("/api/v1/stores/generic/gs/rows?limit=300"))
	if len(p.Rows) != 300 || *p.Next != "k299" || p.Rows[299]["n"] != float64(299) {
		t.Fatalf("limit=300 over 350 rows: %d rows, next %q", len(p.Rows), *p.Next)
	}
	p = decodeRowsPage(t, c.get("/api/v1/stores/generic/gs/rows?limit=300&after=k299"))
	if len(p.Rows) != 50 || *p.Next != "" {
		t.Fatalf("last page: %d rows, next %q", len(p.Rows), *p.Next)
	}
}

// GET /api/v1/stores stops at --page-bytes too, and its next continues it.
func TestListStoresPageBytes(t *testing.T) {
	cfg := testConfig(t)
	cfg.PageBytes = 512
	_, c, _ := serveAPI(t, cfg)
	for i := range 12 {
		expect(t, c.postJSON(fmt.Sprintf("/api/v1/stores/generic/store-with-a-long-name-%02d", i), genericSchema), http.StatusCreated, "")
	}
	seen, pages := c.listAllStores(t, url.Values{}, 12, func(r resp, stores []any, next string) {
		if int64(len(r.body)) > cfg.PageBytes {
			t.Fatalf("stores page is %d bytes, over %d", len(r.body), cfg.PageBytes)
		}
		if len(stores) == 0 {
			t.Fatalf("empty stores page: %s", r.body)
		}
		if last := stores[len(stores)-1].(map[string]any)["target"]; next != "" && next != last {
			t.Fatalf("next %q is not the last store %q", next, last)
		}
	})
	if len(seen) != 12 || pages < 3 {
		t.Fatalf("listed %d stores in %d pages, want 12 in >= 3", len(seen), pages)
	}
}

// With a small --page-bytes and names of mixed lengths over two kinds, every stores page stays
// within the bound (or holds one store), ends with next at its last store, and the pages
// together list every store once, in kind and name order.
func TestListStoresPageBytesMixedNames(t *testing.T) {
	cfg := testConfig(t)
	cfg.PageBytes = 700
	_, c, _ := serveAPI(t, cfg)
	var want []string
	for i := range 14 {
		name := fmt.Sprintf("m%02d-%s", i, strings.Repeat("x", (i*53)%124))
		expect(t, c.do(http.MethodPost, "/api/v1/stores/rollout/"+name, "", nil), http.StatusCreated, "")
		want = append(want, "rollout:"+name)
	}
	for i := range 5 {
		name := fmt.Sprintf("g%02d", i)
		expect(t, c.postJSON("/api/v1/stores/generic/"+name, genericSchema), http.StatusCreated, "")
		want = append(want, "generic:"+name)
	}
	var got []string
	_, pages := c.listAllStores(t, url.Values{"limit": {"1000"}}, 40, func(r resp, stores []any, next string) {
		if len(stores) > 1 && int64(len(r.body)) > cfg.PageBytes {
			t.Fatalf("stores page of %d stores is %d bytes, over %d", len(stores), len(r.body), cfg.PageBytes)
		}
		if len(stores) == 0 {
			t.Fatalf("empty stores page: %s", r.body)
		}
		last := stores[len(stores)-1].(map[string]any)["target"].(string)
		if next != "" && next != last {
			t.Fatalf("next %q is not the last store %q", next, last)
		}
		for _, s := range stores {
			got = append(got, s.(map[string]any)["target"].(string))
		}
	})
	if !slices.Equal(got, want) || pages < 4 {
		t.Fatalf("listed %q in %d pages, want %q in >= 4", got, pages, want)
	}
}
