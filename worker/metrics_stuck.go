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

// stuckWorkflows are the workflow label values of the stuck-run series.
var stuckWorkflows = []string{contract.MergeWalWorkflow, contract.CompactBaseWorkflow}

// setStuck replaces the gauges with one scan's counts by (workflow, reason).
func (m *Metrics) setStuck(counts map[[2]string]int) {
	if m == nil {
		return
	}
	for _, typ := range stuckWorkflows {
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
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.stuck.scans.WithLabelValues(result).Inc()
}
