package bench

import (
	"errors"
	"reflect"

	"github.com/walkeeper/walkeeper/contract"
)

// fleetDesign is one side of the fleet benchmark: how MaintenanceSweep finds the stores in
// debt.
type fleetDesign string

const (
	// designScan is the design before the demand index: one ScanStats activity per kind
	// reads every registered store's stats and returns them in one result.
	designScan fleetDesign = "scan"
	// designDemand lists the demand index (_demand/<kind>/) with one ScanDemand activity
	// per kind and returns a bounded candidate set.
	designDemand fleetDesign = "demand"
)

var fleetDesigns = []fleetDesign{designScan, designDemand}

// errDesignUnavailable: this build's MaintenanceSweep cannot run the design.
var errDesignUnavailable = errors.New("not in this build")

// discoveryActivities are the activities whose completion ends a sweep's discovery step
// (its storage requests are counted up to there; the starts that follow make none).
var discoveryActivities = map[string]bool{contract.ScanStatsActivity: true, "ScanDemand": true}

// ADAPTER (until the demand index is on main; replace with `in.Discovery = ...` then):
// sweepInputFor selects the design through the sweep input field the demand index adds,
// MaintenanceSweepInput.Discovery ("scan" | "demand", default demand), found by reflection
// so that this file builds before and after it lands. A build without the field has only the
// stats scan: the demand side reports errDesignUnavailable and the bench records it as
// "not run" instead of measuring the scan twice under two names.
func sweepInputFor(d fleetDesign, in contract.MaintenanceSweepInput) (contract.MaintenanceSweepInput, error) {
	f := reflect.ValueOf(&in).Elem().FieldByName("Discovery")
	if !f.IsValid() || f.Kind() != reflect.String {
		if d == designScan {
			return in, nil
		}
		return in, errDesignUnavailable
	}
	f.SetString(string(d))
	return in, nil
}
