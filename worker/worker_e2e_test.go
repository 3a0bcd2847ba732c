package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/worker"
)

// End to end against a real Temporal dev server: the count trigger on the flush sweeper
// starts MergeWal, which drains pending generations into the base table, and the HTTP
// merge-wal route with wait=true returns the workflow's result.
func TestWorkerEndToEndWithTemporal(t *testing.T) {
	testtemporal.SkipShort(t)
	_, tc := testtemporal.Start(t)

	cfg := worker.DefaultConfig()
	cfg.Instance = "e2e"
	cfg.Storage = "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg.Listen = "127.0.0.1:0"
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.MergeAfterGenerations = 3
	cfg.SweepInterval = 0
	cfg.FairnessProbe = false // its subject is the merge; TestWorkerWarnsWithoutFairness probes
	w, err := worker.New(cfg, zaptest.NewLogger(t), tc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	api := apitest.Client{T: t, Base: "http://" + w.HTTPAddr()}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		r := api.Do(method, path, body)
		var m map[string]any
		_ = r.Decode(&m)
		return r.Status, m
	}
	if st, m := call("POST", "/api/v1/stores/generic/gs", `{"fields":[{"name":"id","type":"string"}]}`); st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	// One row per seal: each append waits until the flusher has sealed it.
	for i := range 6 {
		if st, m := call("POST", "/api/v1/stores/generic/gs/rows", fmt.Sprintf(`[{"id":"r%d"}]`, i)); st != 200 {
			t.Fatalf("append: %d %v", st, m)
		}
		// Wait for the seal itself, not for the row to be readable: reads of source=wal
		// include the memtable, so only the generation count proves a seal happened.
		// Generations are numbered from 1 per shard, so watermark+pending is the number
		// of generations sealed so far whether or not a merge has drained them.
		deadline := time.Now().Add(10 * time.Second)
		for sealedGenerations(t, call) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("row r%d never sealed", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The count trigger (pending >= 3) merged into the base table without any manual call.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, page := call("GET", "/api/v1/stores/generic/gs/rows?source=base&limit=100", "")
		if rows, _ := page["rows"].([]any); len(rows) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("count trigger never merged pending generations into the base table")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Manual merge with wait drains whatever is left.
	st, m := call("POST", "/api/v1/stores/generic/gs/merge-wal?wait=true", "")
	if st != 200 || m["workflow_id"] != "merge-wal/generic/gs" || m["result"] == nil {
		t.Fatalf("merge-wal?wait=true: %d %v", st, m)
	}
	_, page := call("GET", "/api/v1/stores/generic/gs/rows?source=base&limit=100", "")
	if rows, _ := page["rows"].([]any); len(rows) != 6 {
		t.Fatalf("base rows after manual merge = %d, want 6 (%v)", len(rows), page)
	}
	_, stats := call("GET", "/api/v1/stores/generic/gs/stats", "")
	for _, sh := range stats["shards"].([]any) {
		if p := sh.(map[string]any)["pending_generations"]; p != float64(0) {
			t.Fatalf("pending after manual merge: %v", stats)
		}
	}
}

// sealedGenerations sums watermark+pending_generations over the store's shards.
func sealedGenerations(t *testing.T, call func(method, path, body string) (int, map[string]any)) int {
	t.Helper()
	_, stats := call("GET", "/api/v1/stores/generic/gs/stats", "")
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
