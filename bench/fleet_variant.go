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
// (the worker's --sweep-start-concurrency) and the starts per batch (StartBatch). The zero
// value is the build's defaults.
type fleetVariant struct {
	Concurrency int // 0 = activities.DefaultStartConcurrency
	Batch       int // 0 = contract.DefaultSweepStartBatch
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
	return contract.DefaultSweepStartBatch
}

// String is the variant as --variants spells it: concurrency/batch.
func (v fleetVariant) String() string {
	return fmt.Sprintf("%d/%d", v.concurrency(), v.batch())
}

// parseFleetVariants reads --variants: comma-separated concurrency/batch pairs, e.g.
// "16/256,32/512"; a part left empty takes the default ("/512" = the default concurrency,
// batches of 512). nil = one default variant.
func parseFleetVariants(specs []string) ([]fleetVariant, error) {
	var out []fleetVariant
	seen := map[string]bool{}
	for _, spec := range specs {
		parts := strings.Split(strings.TrimSpace(spec), "/")
		var v fleetVariant
		if len(parts) != 2 {
			return nil, fmt.Errorf("fleet: variant %q: want concurrency/batch, e.g. 32/256", spec)
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

// name labels the variant in tables, targets and plots: "demand" (the sweep's discovery)
// for the default variant, as in the reports of runs before --variants, else
// "demand 32/512".
func (v fleetVariant) name() string {
	if v.isDefault() {
		return "demand"
	}
	return "demand " + v.String()
}

// valueName is name as a result value's prefix: "demand", "demand_32_512".
func (v fleetVariant) valueName() string {
	return strings.NewReplacer(" ", "_", "/", "_").Replace(v.name())
}
