package worker

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// GET /api/v1/stores pages with ?limit=&after=, across kinds, and every store is listed
// exactly once; bad cursors and limits are 400 invalid_input.
func TestListStoresPages(t *testing.T) {
	_, c, _ := serveAPI(t, testConfig(t))
	want := map[string]bool{}
	for i := range 7 {
		name := fmt.Sprintf("g%02d", i)
		expect(t, c.postJSON("/api/v1/stores/generic/"+name, genericSchema), http.StatusCreated, "")
		want["generic:"+name] = true
	}
	for i := range 3 {
		name := fmt.Sprintf("r%02d", i)
		expect(t, c.do(http.MethodPost, "/api/v1/stores/rollout/"+name, "", nil), http.StatusCreated, "")
		want["rollout:"+name] = true
	}
	seen, pages := c.listAllStores(t, url.Values{"limit": {"3"}}, 10, func(r resp, stores []any, _ string) {
		if len(stores) > 3 {
			t.Fatalf("page of %d stores over limit 3: %s", len(stores), r.body)
		}
	})
	if len(seen) != len(want) || pages < 4 {
		t.Fatalf("listed %d stores in %d pages, want %d in >= 4", len(seen), pages, len(want))
	}
	// A bare name is a cursor within ?kind=.
	r := c.get("/api/v1/stores?kind=generic&limit=2&after=g04")
	expect(t, r, http.StatusOK, "")
	if st := r.json(t)["stores"].([]any); len(st) != 2 || st[0].(map[string]any)["name"] != "g05" {
		t.Fatalf("after=g04 = %s", r.body)
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "after=..", "kind=generic&after=rollout:r00"} {
		expect(t, c.get("/api/v1/stores?"+bad), http.StatusBadRequest, CodeInvalidInput)
	}
}

// listAllStores follows next from GET /api/v1/stores?query until it is empty, handing each
// page to check, and returns every target listed and the number of pages; a store listed
// twice, or more than maxPages pages, fails t.
func (c *apiClient) listAllStores(t *testing.T, query url.Values, maxPages int, check func(r resp, stores []any, next string)) (map[string]bool, int) {
	t.Helper()
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		r := c.get("/api/v1/stores?" + query.Encode())
		expect(t, r, http.StatusOK, "")
		body := r.json(t)
		stores := body["stores"].([]any)
		next, _ := body["next"].(string)
		check(r, stores, next)
		for _, s := range stores {
			tgt := s.(map[string]any)["target"].(string)
			if seen[tgt] {
				t.Fatalf("%s listed twice", tgt)
			}
			seen[tgt] = true
		}
		if next == "" {
			return seen, pages
		}
		if pages > maxPages {
			t.Fatal("paging does not end")
		}
		query.Set("after", next)
	}
}
