package worker

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Metrics is one worker's own Prometheus registry (never the global one, so several workers in
// one process do not collide) with the store and worker metrics registered on it.
type Metrics struct {
	Registry *prometheus.Registry
	Store    *store.Metrics

	httpRequests *prometheus.CounterVec   // route, code
	httpSeconds  *prometheus.HistogramVec // route
	httpPanics   *prometheus.CounterVec   // route
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
	// The stuck-run scan's series (stuck_scan.go).
	runsStuck      *prometheus.GaugeVec   // workflow, reason
	runsTerminated *prometheus.CounterVec // workflow
	stuckScans     *prometheus.CounterVec // result
	// temporalFairness is what the start probe found (checkFairness).
	temporalFairness prometheus.Gauge
	// taskQueuePartitions is what the server said at start (checkPartitions), by queue.
	taskQueuePartitions *prometheus.GaugeVec
}

// Trigger label values of walkeeper_trigger_starts_total for the worker's own starts; a
// sweep's starts take their contract trigger (WorkflowStart).
const (
	TriggerCount  = "count"   // a seal took the own shard to merge-after-generations
	TriggerHTTP   = "http"    // POST .../merge-wal
	TriggerDebt   = "debt"    // an append or a row delete was refused for too many pending generations
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
	f := promauto.With(reg)
	m := &Metrics{
		Registry: reg,
		Store:    store.NewMetrics(reg, budget),
		httpRequests: f.NewCounterVec(counterOpts("http", "requests_total",
			"HTTP requests by route pattern and status code."), []string{"route", "code"}),
		httpSeconds: f.NewHistogramVec(histogramOpts("http", "request_seconds",
			"HTTP request latency by route pattern.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}), []string{"route"}),
		httpPanics: f.NewCounterVec(counterOpts("http", "panics_total",
			"HTTP requests whose handler panicked, by route pattern (answered 500 internal, or aborted when the answer had begun)."), []string{"route"}),
		httpUnauthenticated: f.NewGauge(gaugeOpts("http", "unauthenticated",
			"1 when the HTTP data plane listens on a non-loopback address without --auth-token, else 0.")),
		triggerStarts: f.NewCounterVec(counterOpts("trigger", "starts_total",
			"MergeWal starts (or attaches) by this worker's triggers, and MergeWal and CompactBase starts by sweeps (StartWorkflows), by trigger and result; never counted as flush outcomes."), []string{"trigger", "result"}),
		flusherFlush: f.NewHistogram(histogramOpts("sweeper", "flush_seconds",
			"Duration of one store's seal in the flush sweeper (completed seals only).",
			[]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120})),
		flusherTimeouts: f.NewCounterVec(counterOpts("sweeper", "timeouts_total",
			"Seals abandoned by the flush sweeper after the per-store timeout, by kind."), []string{"kind"}),
		flusherSkipped: f.NewCounterVec(counterOpts("sweeper", "skipped_total",
			"Stores skipped by a sweep because their previous (abandoned) seal is still running, by kind."), []string{"kind"}),
		flusherStores: f.NewGaugeVec(gaugeOpts("sweeper", "resident_stores",
			"Resident stores seen by the last sweep of each kind."), []string{"kind"}),
		activities: f.NewCounterVec(counterOpts("activity", "executions_total",
			"Activity executions on this worker by activity, kind and outcome (ok, empty or the Temporal error type)."), []string{"activity", "kind", "outcome"}),
		activitySeconds: f.NewHistogramVec(histogramOpts("activity", "execution_seconds",
			"Activity execution time on this worker by activity.",
			prometheus.ExponentialBuckets(0.001, 4, 11)), []string{"activity"}),
		// The series appears only once a run succeeded on this worker, so a restarted worker
		// does not report "never" as 1970; the alerts take the max over workers.
		maintenance: f.NewGaugeVec(gaugeOpts("maintenance", "last_success_timestamp_seconds",
			"Unix time of the last successful fleet-wide maintenance run (sweep, reconcile) recorded by this worker."), []string{"workflow"}),
		temporalFairness: f.NewGauge(gaugeOpts("temporal", "fairness",
			"1 when the Temporal server dispatches task queues by fairness key (probed at start), 0 when in arrival order, -1 when not known (probe off, pending or inconclusive).")),
		taskQueuePartitions: f.NewGaugeVec(gaugeOpts("temporal", "task_queue_partitions",
			"Read partitions of the task queues this worker polls (the larger of the workflow and activity counts, asked at start; -1 when not known). Fairness holds within a partition: more than 1 lets a light kind's merge wait behind another kind's backlog."), []string{"queue"}),
		runsStuck: f.NewGaugeVec(gaugeOpts("merge", "runs_stuck",
			"MergeWal and CompactBase runs that cannot make progress at this worker's last stuck-run scan, by workflow type and reason (workflow_task, activity_retrying, past_deadline)."), []string{"workflow", "reason"}),
		runsTerminated: f.NewCounterVec(counterOpts("merge", "runs_terminated_total",
			"Stuck runs without a run timeout that this worker's scan terminated past --merge-run-timeout, by workflow type."), []string{"workflow"}),
		stuckScans: f.NewCounterVec(counterOpts("merge", "stuck_scans_total",
			"Stuck-run scans of this worker by result (ok, failed)."), []string{"result"}),
	}
	// Process-wide, as the goroutines that recover them serve every worker of the process.
	f.NewCounterFunc(counterOpts("", "goroutine_panics_total",
		"Panics recovered in goroutines the store, an activity, the flush sweeper or a merge trigger started for a request, an activity or in the background (process-wide): each failed what it served with an internal error instead of ending the process. The log line 'goroutine panicked' has the stack."), func() float64 { return float64(store.RecoveredPanics()) })
	reg.MustRegister(refusedSignals, ignoredInputFields)
	// Series at 0 from the start, so that a first event shows as an increase.
	for _, typ := range stuckTypes {
		refusedSignals.WithLabelValues(typ, contract.ActivityStateSignal)
		m.runsTerminated.WithLabelValues(typ)
	}
	for _, typ := range workflowTypes {
		ignoredInputFields.WithLabelValues(typ)
	}
	m.setStuck(nil)
	m.stuckScans.WithLabelValues("ok")
	m.stuckScans.WithLabelValues("failed")
	m.temporalFairness.Set(fairnessUnknown)
	for _, q := range []string{queueShared, queueShard} {
		m.taskQueuePartitions.WithLabelValues(q).Set(partitionsUnknown)
	}
	for _, k := range store.Kinds {
		m.flusherTimeouts.WithLabelValues(string(k))
		m.flusherSkipped.WithLabelValues(string(k))
		m.flusherStores.WithLabelValues(string(k))
	}
	for _, t := range []string{TriggerCount, TriggerHTTP, TriggerDebt, contract.TriggerSweepAge, contract.TriggerSweepCount,
		contract.TriggerSweepRuns, contract.TriggerSchedule} {
		for _, r := range []string{ResultStarted, ResultFailed} {
			m.triggerStarts.WithLabelValues(t, r)
		}
	}
	return m
}

// counterOpts, gaugeOpts and histogramOpts name a walkeeper_ metric.
func counterOpts(subsystem, name, help string) prometheus.CounterOpts {
	return prometheus.CounterOpts{Namespace: "walkeeper", Subsystem: subsystem, Name: name, Help: help}
}

func gaugeOpts(subsystem, name, help string) prometheus.GaugeOpts {
	return prometheus.GaugeOpts(counterOpts(subsystem, name, help))
}

func histogramOpts(subsystem, name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: "walkeeper", Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}
}

// Handler serves the registry in the Prometheus text format, never compressed: a gzip writer
// holds hundreds of KiB per scrape in flight, which no budget counts, for a small answer.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, DisableCompression: true})
}

// ActivityDone implements activities.Metrics.
func (m *Metrics) ActivityDone(activity string, kind store.Kind, outcome string, d time.Duration) {
	m.activities.WithLabelValues(activity, cmp.Or(string(kind), "all"), outcome).Inc()
	m.activitySeconds.WithLabelValues(activity).Observe(d.Seconds())
}

// MaintenanceSucceeded implements activities.MaintenanceMetrics.
func (m *Metrics) MaintenanceSucceeded(workflow string, at time.Time) {
	if m != nil {
		m.maintenance.WithLabelValues(workflow).Set(float64(at.UnixNano()) / 1e9)
	}
}

// WorkflowStart implements activities.StartMetrics, counting a trigger outside
// contract.Triggers as unknown so the label stays bounded.
func (m *Metrics) WorkflowStart(trigger string, err error) {
	if !slices.Contains(contract.Triggers, trigger) {
		trigger = contract.TriggerUnknown
	}
	m.trigger(trigger, err)
}

func (m *Metrics) trigger(trigger string, err error) {
	r := ResultStarted
	if err != nil {
		r = ResultFailed
	}
	m.triggerStarts.WithLabelValues(trigger, r).Inc()
}

// stuckTypes are the workflow label values of the stuck-run series.
var stuckTypes = []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow}

// setStuck replaces the gauges with one scan's counts by (workflow, reason).
func (m *Metrics) setStuck(counts map[[2]string]int) {
	for _, typ := range stuckTypes {
		for _, r := range StuckReasons {
			m.runsStuck.WithLabelValues(typ, r).Set(float64(counts[[2]string{typ, r}]))
		}
	}
}

// refusedSignals is process-wide, as the client whose workflows add to it is: every worker's
// registry (NewMetrics) reports it.
var refusedSignals = prometheus.NewCounterVec(counterOpts("workflow", "refused_signals_total",
	"Signals whose payload a workflow run on this process refused (it does not decode), by workflow type and signal; the run goes on, and its status counts them in refused_signals."), []string{"workflow", "signal"})

// ignoredInputFields is process-wide, as refusedSignals is.
var ignoredInputFields = prometheus.NewCounterVec(counterOpts("workflow", "ignored_input_fields_total",
	"Members of workflow inputs that no field of the input takes (mistyped, or written by a later build), which runs on this process ignored, by workflow type; the run goes on with its defaults, and its log line 'Input fields ignored', current details and status name them."), []string{"workflow"})

// workflowTypes are the workflow label values of ignoredInputFields; any other is "other".
var workflowTypes = []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow, contract.MaintenanceSweepWorkflow,
	contract.SweepWindowWorkflow, contract.MergeWalTickWorkflow, contract.ReconcileDemandWorkflow}

// SDKMetrics is the metrics handler of the Temporal clients a worker's workflows run on
// (DefaultTemporalConfig sets it), which workflow code reaches through the replay-safe
// workflow.GetMetricsHandler: it exports walkeeper's own workflow counters and drops the SDK's.
var SDKMetrics client.MetricsHandler = sdkMetrics{}

// sdkMetrics keeps only the two tags its counters read: the SDK calls WithTags for every task
// it polls, so cloning the whole tag map there would allocate on the workers' hot path.
type sdkMetrics struct{ workflow, signal string }

func (h sdkMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	if wf, ok := tags[contract.MetricTagWorkflow]; ok {
		h.workflow = wf
	}
	if sig, ok := tags[contract.MetricTagSignal]; ok {
		h.signal = sig
	}
	return h
}

func (h sdkMetrics) Counter(name string) client.MetricsCounter {
	// The labels keep to known values, whatever a tag says.
	wf := h.workflow
	var c prometheus.Counter
	switch name {
	case contract.MetricRefusedSignals:
		sig := h.signal
		if !slices.Contains(stuckTypes, wf) {
			wf = "other"
		}
		if sig != contract.ActivityStateSignal {
			sig = "other"
		}
		c = refusedSignals.WithLabelValues(wf, sig)
	case contract.MetricIgnoredInputFields:
		if !slices.Contains(workflowTypes, wf) {
			wf = "other"
		}
		c = ignoredInputFields.WithLabelValues(wf)
	default:
		return client.MetricsNopHandler.Counter(name)
	}
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

func (sdkMetrics) Gauge(name string) client.MetricsGauge { return client.MetricsNopHandler.Gauge(name) }
func (sdkMetrics) Timer(name string) client.MetricsTimer { return client.MetricsNopHandler.Timer(name) }

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }
