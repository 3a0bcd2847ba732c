package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
)

// fleetVariant is one setting of the sweep's start path, measured side by side with others
// in one run (walkeeper-bench fleet --variants): the starts in flight per StartWorkflows
// (the worker's --sweep-start-concurrency), the starts per batch (StartBatch) and the
// launch cadence (StartPacing). The zero value is the build's defaults.
type fleetVariant struct {
	Concurrency int    // 0 = activities.DefaultStartConcurrency
	Batch       int    // 0 = contract.DefaultSweepStartBatch
	Pacing      string // "" = the workflow's default (planned)
	Eager       bool   // StartWorkflows asks for eager starts (Activities.EagerStart)
}

func (v fleetVariant) isDefault() bool { return v == fleetVariant{} }

func (v fleetVariant) concurrency() int {
	if v.Concurrency > 0 {
		return v.Concurrency
	}
	return activities.DefaultStartConcurrency
}

func (v fleetVariant) batch() int {
	if v.Batch > 0 {
		return v.Batch
	}
	return fleetStartBatch
}

func (v fleetVariant) pacing() string {
	if v.Pacing != "" {
		return v.Pacing
	}
	return contract.StartPacingPlanned
}

// String is the variant as --variants spells it: concurrency/batch/pacing[/eager].
func (v fleetVariant) String() string {
	s := fmt.Sprintf("%d/%d/%s", v.concurrency(), v.batch(), v.pacing())
	if v.Eager {
		s += "/eager"
	}
	return s
}

// parseFleetVariants reads --variants: comma-separated concurrency/batch/pacing triples,
// e.g. "16/256/after-launch,32/512/planned"; a part left empty takes the default
// ("/512/" = the default concurrency and pacing, batches of 512), and a fourth part "eager"
// asks for eager starts. nil = one default variant.
func parseFleetVariants(specs []string) ([]fleetVariant, error) {
	var out []fleetVariant
	seen := map[string]bool{}
	for _, spec := range specs {
		parts := strings.Split(strings.TrimSpace(spec), "/")
		var v fleetVariant
		if len(parts) == 4 && parts[3] == "eager" {
			v.Eager, parts = true, parts[:3]
		}
		if len(parts) != 3 {
			return nil, fmt.Errorf("fleet: variant %q: want concurrency/batch/pacing[/eager], e.g. 32/256/planned", spec)
		}
		for i, bound := range []int{activities.MaxStartConcurrency, contract.MaxStartBatch} {
			if parts[i] == "" {
				continue
			}
			n, err := strconv.Atoi(parts[i])
			if err != nil || n < 1 || n > bound {
				return nil, fmt.Errorf("fleet: variant %q: %q is not 1 to %d", spec, parts[i], bound)
			}
			if i == 0 {
				v.Concurrency = n
			} else {
				v.Batch = n
			}
		}
		switch parts[2] {
		case "", contract.StartPacingPlanned, contract.StartPacingAfterLaunch:
			v.Pacing = parts[2]
		default:
			return nil, fmt.Errorf("fleet: variant %q: pacing %q: want %s or %s", spec, parts[2], contract.StartPacingPlanned, contract.StartPacingAfterLaunch)
		}
		if seen[v.String()] {
			return nil, fmt.Errorf("fleet: variant %q listed twice", spec)
		}
		seen[v.String()] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		out = []fleetVariant{{}}
	}
	return out, nil
}

// fleetSide is one column of the comparison: a design, and for the demand design a
// variant of its start path (the scan's starts are not what it is measured for).
type fleetSide struct {
	design  fleetDesign
	variant fleetVariant
}

// name labels the side in tables, targets and plots: the design alone for the default
// variant (the reports of runs before --variants), else "demand 32/512/planned".
func (s fleetSide) name() string {
	if s.variant.isDefault() {
		return string(s.design)
	}
	return string(s.design) + " " + s.variant.String()
}

// valueName is name as a result value's prefix: "demand", "demand_32_512_planned".
func (s fleetSide) valueName() string {
	return strings.NewReplacer(" ", "_", "/", "_").Replace(s.name())
}
