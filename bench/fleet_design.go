package bench

import (
	"errors"

	"github.com/walkeeper/walkeeper/contract"
)

// fleetDesign is one side of the fleet benchmark: how MaintenanceSweep finds the stores in
// debt (MaintenanceSweepInput.Discovery).
type fleetDesign string

const (
	// designScan is the design before the demand index: one ScanStats activity per kind
	// reads every registered store's stats and returns them in one result.
	designScan fleetDesign = contract.DiscoveryScan
	// designDemand lists the demand index (_demand/<kind>/) with one ScanDemand activity
	// per kind and returns a bounded candidate set.
	designDemand fleetDesign = contract.DiscoveryDemand
)

var fleetDesigns = []fleetDesign{designScan, designDemand}

// errDesignUnavailable: this build's MaintenanceSweep cannot run the design.
var errDesignUnavailable = errors.New("not in this build")

// discoveryActivities are the activities whose completion ends a sweep's discovery step
// (its storage requests are counted up to there; the starts that follow make none).
var discoveryActivities = map[string]bool{contract.ScanStatsActivity: true, contract.ScanDemandActivity: true}

// sweepInputFor selects the design through the sweep input.
func sweepInputFor(d fleetDesign, in contract.MaintenanceSweepInput) (contract.MaintenanceSweepInput, error) {
	switch d {
	case designScan, designDemand:
		in.Discovery = string(d)
		return in, nil
	default:
		return in, errDesignUnavailable
	}
}
