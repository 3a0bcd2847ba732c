package worker_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/client"
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
	w, logs := startObservedWorker(t, tc, "unfair", true)
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

// A worker says at start how many partitions its task queues have, and warns when there is
// more than one: fairness holds within a partition only.
func TestWorkerReportsTaskQueuePartitions(t *testing.T) {
	testtemporal.SkipShort(t)
	for _, tc := range []struct {
		name       string
		partitions int
	}{{"tuned", 1}, {"server default", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testtemporal.Options{}
			if tc.partitions != 1 {
				opts.DynamicConfig = map[string]any{"matching.numTaskqueueReadPartitions": tc.partitions,
					"matching.numTaskqueueWritePartitions": tc.partitions}
			}
			_, c := testtemporal.StartSelected(t, opts)
			w, logs := startObservedWorker(t, c, "partitions", false)
			deadline := time.Now().Add(time.Minute)
			for labeledGauge(t, w, "walkeeper_temporal_task_queue_partitions", "queue", "shard") < 0 {
				if time.Now().After(deadline) {
					t.Fatalf("walkeeper_temporal_task_queue_partitions never set; logs: %v", logs.All())
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, q := range []string{"shared", "shard"} {
				if got := labeledGauge(t, w, "walkeeper_temporal_task_queue_partitions", "queue", q); got != float64(tc.partitions) {
					t.Errorf("queue %s: %v partitions, want %d", q, got, tc.partitions)
				}
			}
			// The gauge is set before the warning is logged: wait for the warnings a moment too.
			want := map[bool]int{true: 2, false: 0}[tc.partitions > 1]
			warned := logs.FilterMessageSnippet("matching.numTaskqueueReadPartitions").Len()
			for warned < want && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				warned = logs.FilterMessageSnippet("matching.numTaskqueueReadPartitions").Len()
			}
			if warned != want {
				t.Errorf("%d partition warnings, want %d: %v", warned, want, logs.All())
			}
		})
	}
}

// startObservedWorker starts a worker with file storage on c and returns it with its logs;
// probe turns the fairness probe on.
func startObservedWorker(t *testing.T, c client.Client, instance string, probe bool) (*worker.Worker, *observer.ObservedLogs) {
	t.Helper()
	cfg := worker.DefaultConfig()
	cfg.Instance = instance
	cfg.Storage = "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	cfg.Listen = "127.0.0.1:0"
	cfg.SweepInterval = 0
	cfg.FairnessProbe = probe
	core, logs := observer.New(zap.InfoLevel)
	w, err := worker.New(cfg, zap.New(core), c)
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
	return w, logs
}

// labeledGauge is the value of gauge name's series whose label is value.
func labeledGauge(t *testing.T, w *worker.Worker, name, label, value string) float64 {
	t.Helper()
	mfs, err := w.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{%s=%q} not found", name, label, value)
	return 0
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
