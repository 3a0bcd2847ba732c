package worker

import "time"

// MaintenanceSucceeded implements activities.MaintenanceMetrics.
func (m *Metrics) MaintenanceSucceeded(workflow string, at time.Time) {
	if m == nil || m.maintenance == nil {
		return
	}
	m.maintenance.WithLabelValues(workflow).Set(float64(at.UnixNano()) / 1e9)
}
