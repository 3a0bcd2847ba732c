package worker

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// End to end against a real Temporal dev server: the count trigger on the flush sweeper
// starts MergeWal, which drains pending generations into the base table, and the HTTP
// merge-wal route with wait=true returns the workflow's result.
func TestWorkerEndToEndWithTemporal(t *testing.T) {
	testtemporal.SkipShort(t)
	_, tc := testtemporal.Start(t)

	cfg := testConfig(t)
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.MergeAfterGenerations = 3
	c := newClient(t, started(t, newWorker(t, cfg, zaptest.NewLogger(t), tc)))
	expect(t, c.postJSON("/api/v1/stores/generic/gs", `{"fields":[{"name":"id","type":"string"}]}`), http.StatusCreated, "")
	stats := func() map[string]any { return c.get("/api/v1/stores/generic/gs/stats").json(t) }
	baseRows := func() int {
		rows, _ := c.get("/api/v1/stores/generic/gs/rows?source=base&limit=100").json(t)["rows"].([]any)
		return len(rows)
	}
	// One row per seal: each append waits until the flusher has sealed it.
	for i := range 6 {
		expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", fmt.Sprintf(`[{"id":"r%d"}]`, i)), http.StatusOK, "")
		// Wait for the seal itself, not for the row to be readable: reads of source=wal
		// include the memtable, so only the generation count proves a seal happened.
		// Generations are numbered from 1 per shard, so watermark+pending is the number
		// of generations sealed so far whether or not a merge has drained them.
		deadline := time.Now().Add(10 * time.Second)
		for sealedGenerations(stats()) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("row r%d never sealed", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The count trigger (pending >= 3) merged into the base table without any manual call.
	waitUntil(t, "count-triggered merge into the base table", func() bool { return baseRows() >= 3 })

	// Manual merge with wait drains whatever is left.
	r := c.do(http.MethodPost, "/api/v1/stores/generic/gs/merge-wal?wait=true", "", nil)
	expect(t, r, http.StatusOK, "")
	if m := r.json(t); m["workflow_id"] != "merge-wal/generic/gs" || m["result"] == nil {
		t.Fatalf("merge-wal?wait=true: %s", r.body)
	}
	if n := baseRows(); n != 6 {
		t.Fatalf("base rows after manual merge = %d, want 6", n)
	}
	st := stats()
	for _, sh := range st["shards"].([]any) {
		if p := sh.(map[string]any)["pending_generations"]; p != float64(0) {
			t.Fatalf("pending after manual merge: %v", st)
		}
	}
}

// sealedGenerations sums watermark+pending_generations over the shards of a stats answer.
func sealedGenerations(stats map[string]any) int {
	shards, _ := stats["shards"].([]any)
	total := 0
	for _, raw := range shards {
		sh, _ := raw.(map[string]any)
		wm, _ := sh["watermark"].(float64)
		pending, _ := sh["pending_generations"].(float64)
		total += int(wm) + int(pending)
	}
	return total
}
