package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newMaintenanceGauge registers walkeeper_maintenance_last_success_timestamp_seconds: the
// time of the last fleet-wide run (workflow="sweep" or "reconcile") that finished on this
// worker. The series appears only once a run succeeded here, so a restarted worker does not
// report "never" as 1970; the alert takes the max over workers (deploy/prometheus-rules.yml).
func newMaintenanceGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "walkeeper", Subsystem: "maintenance", Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last successful fleet-wide maintenance run (sweep, reconcile) recorded by this worker.",
	}, []string{"workflow"})
	reg.MustRegister(g)
	return g
}

// MaintenanceSucceeded implements activities.MaintenanceMetrics.
func (m *Metrics) MaintenanceSucceeded(workflow string, at time.Time) {
	if m == nil || m.maintenance == nil {
		return
	}
	m.maintenance.WithLabelValues(workflow).Set(float64(at.UnixNano()) / 1e9)
}
