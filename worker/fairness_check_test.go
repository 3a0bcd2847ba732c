package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/worker"
)

// A worker facing a Temporal server without task-queue fairness says so at start: a
// warning naming matching.enableFairness and walkeeper_temporal_fairness 0.
func TestWorkerWarnsWithoutFairness(t *testing.T) {
	testtemporal.SkipShort(t)
	_, tc := testtemporal.StartSelected(t, testtemporal.Options{DynamicConfig: map[string]any{"matching.enableFairness": false}})
	cfg := worker.DefaultConfig()
	cfg.Instance = "unfair"
	cfg.Storage = "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg.Listen = "127.0.0.1:0"
	cfg.SweepInterval = 0
	core, logs := observer.New(zap.InfoLevel)
	w, err := worker.New(cfg, zap.New(core), tc)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	})
	fairness := w.Metrics().Registry
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := testutil.GatherAndCount(fairness, "walkeeper_temporal_fairness")
		if err != nil || n != 1 {
			t.Fatalf("walkeeper_temporal_fairness: %d series, %v", n, err)
		}
		if logs.FilterMessageSnippet("matching.enableFairness").Len() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning about matching.enableFairness; logs: %v", logs.All())
		}
		time.Sleep(100 * time.Millisecond)
	}
	warn := logs.FilterMessageSnippet("matching.enableFairness").All()[0]
	if warn.Level != zap.WarnLevel || warn.Message == "" {
		t.Fatalf("log %+v, want a warning", warn)
	}
	if got := gaugeValue(t, w, "walkeeper_temporal_fairness"); got != 0 {
		t.Fatalf("walkeeper_temporal_fairness = %v, want 0 (off)", got)
	}
}

func gaugeValue(t *testing.T, w *worker.Worker, name string) float64 {
	t.Helper()
	mfs, err := w.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not found", name)
	return 0
}
