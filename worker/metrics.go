package worker

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walkeeper/walkeeper/store"
)

// Metrics is one worker's Prometheus registry with the store metrics and the worker-level
// metrics registered on it. Each Worker has its own registry (never the global one), so
// several workers in one process (walkeeper dev) do not collide.
type Metrics struct {
	Registry *prometheus.Registry
	Store    *store.Metrics

	httpRequests *prometheus.CounterVec   // route, code
	httpSeconds  *prometheus.HistogramVec // route
	// httpUnauthenticated is 1 while the data plane listens beyond loopback without a token.
	httpUnauthenticated prometheus.Gauge
	triggerStarts       *prometheus.CounterVec // trigger, result
	flusherFlush        prometheus.Histogram
	flusherTimeouts     *prometheus.CounterVec   // kind
	flusherSkipped      *prometheus.CounterVec   // kind
	flusherStores       *prometheus.GaugeVec     // kind
	activities          *prometheus.CounterVec   // activity, kind, outcome
	activitySeconds     *prometheus.HistogramVec // activity
	maintenance         *prometheus.GaugeVec     // workflow
	stuck               stuckMetrics
	// temporalFairness is what the start probe found (checkFairness).
	temporalFairness prometheus.Gauge
	// taskQueuePartitions is what the server said at start (checkPartitions), by queue.
	taskQueuePartitions *prometheus.GaugeVec
}

// Trigger label values of walkeeper_trigger_starts_total.
const (
	TriggerCount  = "count"   // a seal took the own shard to merge-after-generations
	TriggerHTTP   = "http"    // POST .../merge-wal
	TriggerDebt   = "debt"    // an append was refused for too many pending generations
	ResultStarted = "started" // started or attached (workflow-ID dedupe)
	ResultFailed  = "failed"
)

// NewMetrics creates a registry with Go and process collectors, the store metrics (whose
// budget gauges read budget, which may be nil) and the worker metrics.
func NewMetrics(budget *store.Budget) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m := &Metrics{
		Registry: reg,
		Store:    store.NewMetrics(reg, budget),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "walkeeper", Subsystem: "http", Name: "request_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		httpUnauthenticated: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "http", Name: "unauthenticated",
			Help: "1 when the HTTP data plane listens on a non-loopback address without --auth-token, else 0.",
		}),
		triggerStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "trigger", Name: "starts_total",
			Help: "MergeWal starts (or attaches) by trigger and result; never counted as flush outcomes.",
		}, []string{"trigger", "result"}),
		flusherFlush: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "walkeeper", Subsystem: "sweeper", Name: "flush_seconds",
			Help:    "Duration of one store's seal in the flush sweeper (completed seals only).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		flusherTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "sweeper", Name: "timeouts_total",
			Help: "Seals abandoned by the flush sweeper after the per-store timeout, by kind.",
		}, []string{"kind"}),
		flusherSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "sweeper", Name: "skipped_total",
			Help: "Stores skipped by a sweep because their previous (abandoned) seal is still running, by kind.",
		}, []string{"kind"}),
		flusherStores: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "sweeper", Name: "resident_stores",
			Help: "Resident stores seen by the last sweep of each kind.",
		}, []string{"kind"}),
		activities: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "activity", Name: "executions_total",
			Help: "Activity executions on this worker by activity, kind and outcome (ok, empty or the Temporal error type).",
		}, []string{"activity", "kind", "outcome"}),
		activitySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "walkeeper", Subsystem: "activity", Name: "execution_seconds",
			Help:    "Activity execution time on this worker by activity.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 11),
		}, []string{"activity"}),
		// The series appears only once a run succeeded on this worker, so a restarted worker
		// does not report "never" as 1970; the alerts take the max over workers.
		maintenance: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "maintenance", Name: "last_success_timestamp_seconds",
			Help: "Unix time of the last successful fleet-wide maintenance run (sweep, reconcile) recorded by this worker.",
		}, []string{"workflow"}),
		temporalFairness: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "temporal", Name: "fairness",
			Help: "1 when the Temporal server dispatches task queues by fairness key (probed at start), 0 when in arrival order, -1 when not known (probe off, pending or inconclusive).",
		}),
		taskQueuePartitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "temporal", Name: "task_queue_partitions",
			Help: "Read partitions of the task queues this worker polls (the larger of the workflow and activity counts, asked at start; -1 when not known). Fairness holds within a partition: more than 1 lets a light kind's merge wait behind another kind's backlog.",
		}, []string{"queue"}),
	}
	reg.MustRegister(m.httpRequests, m.httpSeconds, m.httpUnauthenticated, m.triggerStarts, m.flusherFlush,
		m.flusherTimeouts, m.flusherSkipped, m.flusherStores, m.activities, m.activitySeconds,
		m.maintenance, m.temporalFairness, m.taskQueuePartitions)
	m.stuck = newStuckMetrics(reg)
	m.temporalFairness.Set(fairnessUnknown)
	for _, q := range []string{queueShared, queueShard} {
		m.taskQueuePartitions.WithLabelValues(q).Set(partitionsUnknown)
	}
	for _, k := range store.Kinds {
		m.flusherTimeouts.WithLabelValues(string(k))
		m.flusherSkipped.WithLabelValues(string(k))
		m.flusherStores.WithLabelValues(string(k))
	}
	for _, t := range []string{TriggerCount, TriggerHTTP, TriggerDebt} {
		for _, r := range []string{ResultStarted, ResultFailed} {
			m.triggerStarts.WithLabelValues(t, r)
		}
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ActivityDone implements activities.Metrics.
func (m *Metrics) ActivityDone(activity string, kind store.Kind, outcome string, d time.Duration) {
	k := string(kind)
	if k == "" {
		k = "all"
	}
	m.activities.WithLabelValues(activity, k, outcome).Inc()
	m.activitySeconds.WithLabelValues(activity).Observe(d.Seconds())
}

// MaintenanceSucceeded implements activities.MaintenanceMetrics.
func (m *Metrics) MaintenanceSucceeded(workflow string, at time.Time) {
	if m != nil {
		m.maintenance.WithLabelValues(workflow).Set(float64(at.UnixNano()) / 1e9)
	}
}

func (m *Metrics) trigger(trigger string, err error) {
	if m == nil {
		return
	}
	r := ResultStarted
	if err != nil {
		r = ResultFailed
	}
	m.triggerStarts.WithLabelValues(trigger, r).Inc()
}
