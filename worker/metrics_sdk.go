package worker

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// Workflow code cannot reach Prometheus; it adds to counters through the SDK's replay-safe
// workflow.GetMetricsHandler, which is the Temporal client's metrics handler. SDKMetrics is
// that handler: it exports walkeeper's own workflow counters and drops the SDK's metrics,
// which walkeeper does not export.

// refusedSignals is process-wide, as the client whose workflows add to it is: every worker's
// registry (NewMetrics) reports it.
var refusedSignals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "walkeeper", Subsystem: "workflow", Name: "refused_signals_total", Help: "Signals whose payload a workflow run on this process refused (it does not decode), by workflow type and signal; the run goes on, and its status counts them in refused_signals."}, []string{"workflow", "signal"})

// ignoredInputFields is process-wide, as refusedSignals is.
var ignoredInputFields = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "walkeeper", Subsystem: "workflow", Name: "ignored_input_fields_total", Help: "Members of workflow inputs that no field of the input takes (mistyped, or written by a later build), which runs on this process ignored, by workflow type; the run goes on with its defaults, and its log line 'Input fields ignored', current details and status name them."}, []string{"workflow"})

// workflowTypes are the workflow label values of ignoredInputFields; any other is "other".
var workflowTypes = []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow, contract.MaintenanceSweepWorkflow,
	contract.SweepWindowWorkflow, contract.MergeWalTickWorkflow, contract.ReconcileDemandWorkflow}

// SDKMetrics is the metrics handler of the Temporal clients a worker's workflows run on
// (DefaultTemporalConfig sets it).
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
	switch name {
	case contract.MetricRefusedSignals:
		sig := h.signal
		if !slices.Contains(stuckTypes, wf) {
			wf = "other"
		}
		if sig != contract.ActivityStateSignal {
			sig = "other"
		}
		c := refusedSignals.WithLabelValues(wf, sig)
		return counterFunc(func(d int64) { c.Add(float64(d)) })
	case contract.MetricIgnoredInputFields:
		if !slices.Contains(workflowTypes, wf) {
			wf = "other"
		}
		c := ignoredInputFields.WithLabelValues(wf)
		return counterFunc(func(d int64) { c.Add(float64(d)) })
	}
	return client.MetricsNopHandler.Counter(name)
}

func (sdkMetrics) Gauge(name string) client.MetricsGauge { return client.MetricsNopHandler.Gauge(name) }
func (sdkMetrics) Timer(name string) client.MetricsTimer { return client.MetricsNopHandler.Timer(name) }

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }
