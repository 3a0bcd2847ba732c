package bench

import "github.com/walkeeper/walkeeper/contract"

// fleetDesign names what the fleet benchmark measures: how MaintenanceSweep finds the
// stores in debt. Reports and CSVs keep it as a column, so a run can be set beside one of an
// earlier build (scripts/bench-before-after.sh).
type fleetDesign string

// designDemand lists the demand index (_demand/<kind>/) with ScanDemand activities per kind,
// each returning a bounded candidate page.
const designDemand fleetDesign = "demand"

var fleetDesigns = []fleetDesign{designDemand}

// discoveryActivities are the activities whose completion ends a sweep's discovery step
// (its storage requests are counted up to there; the starts that follow make none).
var discoveryActivities = map[string]bool{contract.ScanDemandActivity: true}
