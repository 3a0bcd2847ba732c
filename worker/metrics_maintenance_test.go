package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gauge of the last successful maintenance run is absent until a run succeeds here,
// then holds the run's time per workflow.
func TestMaintenanceSucceededSetsTheGauge(t *testing.T) {
	m := NewMetrics(nil)
	if n := testutil.CollectAndCount(m.Registry, "walkeeper_maintenance_last_success_timestamp_seconds"); n != 0 {
		t.Fatalf("%d series before any run, want none", n)
	}
	at := time.Unix(1_800_000_000, 500_000_000)
	m.MaintenanceSucceeded("sweep", at)
	want := `
# HELP walkeeper_maintenance_last_success_timestamp_seconds Unix time of the last successful fleet-wide maintenance run (sweep, reconcile) recorded by this worker.
# TYPE walkeeper_maintenance_last_success_timestamp_seconds gauge
walkeeper_maintenance_last_success_timestamp_seconds{workflow="sweep"} 1.8000000005e+09
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "walkeeper_maintenance_last_success_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
	var nilMetrics *Metrics
	nilMetrics.MaintenanceSucceeded("sweep", at) // no metrics: no panic
}
