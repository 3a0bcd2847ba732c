package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/walkeeper/walkeeper/store"
)

// GET .../stats lists a page of shards (100 by default) with totals over every shard; a walk
// that follows next with ?limit= visits each shard once, in shard id order, and bad limits and
// cursors are 400 invalid_input naming the parameter.
func TestStatsPagesShards(t *testing.T) {
	cfg := testConfig(t)
	cfg.Storage = "mem://" + strings.ReplaceAll(t.Name(), "/", "-") // many writers' shards, not the disk, are under test
	_, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	const shards = defaultStatsLimit + 5
	sealOnShards(t, cfg.Storage, store.Target{Kind: store.KindGeneric, Name: "gs"}, shards)

	// The default page: 100 shards, the totals of all 105, and next.
	r := c.get("/api/v1/stores/generic/gs/stats")
	expect(t, r, http.StatusOK, "")
	body := r.json(t)
	if got := len(body["shards"].([]any)); got != defaultStatsLimit {
		t.Fatalf("default page lists %d shards, want %d", got, defaultStatsLimit)
	}
	totals := body["totals"].(map[string]any)
	for k, want := range map[string]float64{"shards": shards, "pending_shards": shards, "pending_generations": shards, "max_shard_pending": 1} {
		if totals[k] != want {
			t.Fatalf("totals.%s = %v, want %v: %v", k, totals[k], want, totals)
		}
	}
	if totals["pending_bytes"].(float64) <= 0 || totals["oldest_pending"] == nil {
		t.Fatalf("totals lack pending bytes or the oldest pending: %v", totals)
	}
	if next, _ := body["next"].(string); next == "" {
		t.Fatalf("a full default page has no next: %v", body["next"])
	}

	// A walk of ?limit=7 pages: each shard once, in order, with the same totals on every page.
	seen := map[string]bool{}
	last, pages := "", 0
	q := url.Values{"limit": {"7"}}
	for {
		pages++
		if pages > shards {
			t.Fatal("paging does not end")
		}
		r := c.get("/api/v1/stores/generic/gs/stats?" + q.Encode())
		expect(t, r, http.StatusOK, "")
		body := r.json(t)
		page := body["shards"].([]any)
		if len(page) > 7 {
			t.Fatalf("page of %d shards over limit 7", len(page))
		}
		if got := body["totals"].(map[string]any)["shards"]; got != float64(shards) {
			t.Fatalf("page %d: totals.shards = %v", pages, got)
		}
		for _, s := range page {
			id := s.(map[string]any)["shard"].(string)
			if seen[id] || id <= last {
				t.Fatalf("shard %s listed twice or out of order (after %s)", id, last)
			}
			seen[id], last = true, id
		}
		next, _ := body["next"].(string)
		if next == "" {
			break
		}
		if next != last {
			t.Fatalf("next %q is not the last shard listed %q", next, last)
		}
		q.Set("after", next)
	}
	if len(seen) != shards || pages != (shards+6)/7 {
		t.Fatalf("listed %d shards in %d pages, want %d in %d", len(seen), pages, shards, (shards+6)/7)
	}

	for _, bad := range []struct{ query, names string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"limit=-1", "limit"},
		{"after=nope", "after"}, {"after=" + last + "x", "after"}, {"after=generic:gs", "after"},
	} {
		r := c.get("/api/v1/stores/generic/gs/stats?" + bad.query)
		expect(t, r, http.StatusBadRequest, CodeInvalidInput)
		if msg, _ := r.json(t)["error"].(string); !strings.HasPrefix(msg, bad.names+" ") {
			t.Fatalf("?%s: error %q does not name %s", bad.query, msg, bad.names)
		}
	}
}

// sealOnShards seals one generation of one row into t from each of n writers (n shards).
func sealOnShards(t *testing.T, storage string, tg store.Target, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		opts := store.DefaultOptions()
		opts.InstanceID = fmt.Sprintf("writer-%03d", i)
		db, err := store.OpenDB(ctx, storage, opts)
		if err != nil {
			t.Fatal(err)
		}
		s, err := db.Open(ctx, tg)
		if err == nil {
			_, err = s.Append(ctx, []store.Row{{Key: "k", Values: []any{"k", nil, nil}}})
		}
		if err == nil {
			_, err = s.Flush(ctx)
		}
		if cerr := db.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
}
