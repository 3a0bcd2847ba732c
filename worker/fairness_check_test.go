package worker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// A worker facing a Temporal server without task-queue fairness says so at start: a
// warning naming matching.enableFairness and walkeeper_temporal_fairness 0.
func TestWorkerWarnsWithoutFairness(t *testing.T) {
	testtemporal.SkipShort(t)
	_, tc := testtemporal.StartSelected(t, testtemporal.Options{DynamicConfig: map[string]any{"matching.enableFairness": false}})
	w, logs := startObservedWorker(t, tc, true)
	warnings := func() []observer.LoggedEntry { return logs.FilterMessageSnippet("matching.enableFairness").All() }
	require.Eventually(t, func() bool { return len(warnings()) > 0 }, 2*time.Minute, 100*time.Millisecond,
		"no warning about matching.enableFairness; logs: %v", logs.All())
	if warn := warnings()[0]; warn.Level != zap.WarnLevel || warn.Message == "" {
		t.Fatalf("log %+v, want a warning", warn)
	}
	if got := testutil.ToFloat64(w.metrics.temporalFairness); got != fairnessOff {
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
			w, logs := startObservedWorker(t, c, false)
			partitions := func(q string) float64 {
				return testutil.ToFloat64(w.metrics.taskQueuePartitions.WithLabelValues(q))
			}
			waitUntil(t, "walkeeper_temporal_task_queue_partitions", func() bool { return partitions(queueShard) >= 0 })
			for _, q := range []string{queueShared, queueShard} {
				if got := partitions(q); got != float64(tc.partitions) {
					t.Errorf("queue %s: %v partitions, want %d", q, got, tc.partitions)
				}
			}
			// The gauge is set before the warning is logged: wait for the warnings a moment too.
			want := map[bool]int{true: 2, false: 0}[tc.partitions > 1]
			warned := func() int { return logs.FilterMessageSnippet("matching.numTaskqueueReadPartitions").Len() }
			waitUntil(t, "partition warnings", func() bool { return warned() >= want })
			if warned() != want {
				t.Errorf("%d partition warnings, want %d: %v", warned(), want, logs.All())
			}
		})
	}
}

// startObservedWorker starts a worker on c and returns it with its logs; probe turns the
// fairness probe on.
func startObservedWorker(t *testing.T, c client.Client, probe bool) (*Worker, *observer.ObservedLogs) {
	t.Helper()
	cfg := testConfig(t)
	cfg.FairnessProbe = probe
	core, logs := observer.New(zap.InfoLevel)
	return started(t, newWorker(t, cfg, zap.New(core), c)), logs
}
