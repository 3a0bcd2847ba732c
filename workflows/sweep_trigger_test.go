package workflows

import (
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
)

// A sweep start is urgent once the target's debt is contract.UrgentPastTriggerFactor times
// past a merge threshold, by count or by age; the start request carries the verdict.
func TestSweepMergeUrgentFarPastItsThresholds(t *testing.T) {
	in := contract.MaintenanceSweepInput{MergeMinGenerations: 8, MaxPendingAge: 10 * time.Minute}.WithDefaults()
	f := contract.UrgentPastTriggerFactor
	for _, tc := range []struct {
		name string
		t    contract.DemandTarget
		want bool
	}{
		{"at the count threshold", contract.DemandTarget{Target: "generic:a", Pending: 8}, false},
		{"just below urgent by count", contract.DemandTarget{Target: "generic:a", Pending: f*8 - 1}, false},
		{"urgent by count", contract.DemandTarget{Target: "generic:a", Pending: f * 8}, true},
		{"old, below urgent by age", contract.DemandTarget{Target: "generic:a", Pending: 1, OldestPendingAge: 11 * time.Minute}, false},
		{"urgent by age", contract.DemandTarget{Target: "generic:a", Pending: 1, OldestPendingAge: time.Duration(f) * 10 * time.Minute}, true},
	} {
		wants := wantStarts(tc.t, in)
		if len(wants) != 1 {
			t.Fatalf("%s: %d starts planned, want 1", tc.name, len(wants))
		}
		if got := wants[0].req.Urgent; got != tc.want {
			t.Errorf("%s: urgent %v, want %v", tc.name, got, tc.want)
		}
	}
	off := in
	off.MaxPendingAge = -1
	if mergeUrgent(contract.DemandTarget{Pending: 1, OldestPendingAge: 1000 * time.Hour}, off) {
		t.Error("with the age trigger off, age makes nothing urgent")
	}
}
