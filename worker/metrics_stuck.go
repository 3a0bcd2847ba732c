package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkeeper/walkeeper/contract"
)

// stuckMetrics are the stuck-run scan's series (stuck_scan.go).
type stuckMetrics struct {
	runs       *prometheus.GaugeVec   // workflow, reason
	terminated *prometheus.CounterVec // workflow
	scans      *prometheus.CounterVec // result
}

func newStuckMetrics(reg prometheus.Registerer) stuckMetrics {
	m := stuckMetrics{
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "walkeeper", Subsystem: "merge", Name: "runs_stuck",
			Help: "MergeWal and CompactBase runs that cannot make progress at this worker's last stuck-run scan, by workflow type and reason (workflow_task, activity_retrying, past_deadline).",
		}, []string{"workflow", "reason"}),
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "merge", Name: "runs_terminated_total",
			Help: "Stuck runs without a run timeout that this worker's scan terminated past --merge-run-timeout, by workflow type.",
		}, []string{"workflow"}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "walkeeper", Subsystem: "merge", Name: "stuck_scans_total",
			Help: "Stuck-run scans of this worker by result (ok, failed).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.runs, m.terminated, m.scans)
	for _, typ := range []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow} {
		m.terminated.WithLabelValues(typ)
		for _, r := range StuckReasons {
			m.runs.WithLabelValues(typ, r)
		}
	}
	m.scans.WithLabelValues("ok")
	m.scans.WithLabelValues("failed")
	return m
}

// setStuck replaces the gauges with one scan's counts by (workflow, reason).
func (m *Metrics) setStuck(counts map[[2]string]int) {
	if m == nil {
		return
	}
	for _, typ := range []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow} {
		for _, r := range StuckReasons {
			m.stuck.runs.WithLabelValues(typ, r).Set(float64(counts[[2]string{typ, r}]))
		}
	}
}

func (m *Metrics) stuckTerminated(typ string) {
	if m != nil {
		m.stuck.terminated.WithLabelValues(typ).Inc()
	}
}

func (m *Metrics) stuckScanned(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.stuck.scans.WithLabelValues("failed").Inc()
		return
	}
	m.stuck.scans.WithLabelValues("ok").Inc()
}
