package bench

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
)

// fleetVariant is one setting of the sweep's start path (walkeeper-bench fleet --variants):
// the starts in flight per StartWorkflows (--sweep-start-concurrency) and the starts per
// batch (StartBatch); a zero field is the build's default.
type fleetVariant struct{ Concurrency, Batch int }

func (v fleetVariant) isDefault() bool { return v == fleetVariant{} }

func (v fleetVariant) batch() int { return cmp.Or(v.Batch, contract.DefaultSweepStartBatch) }

// String is the variant as --variants spells it: concurrency/batch.
func (v fleetVariant) String() string {
	return fmt.Sprintf("%d/%d", cmp.Or(v.Concurrency, activities.DefaultStartConcurrency), v.batch())
}

// parseFleetVariants reads --variants ("16/256,/512"); nil = one default variant.
func parseFleetVariants(specs []string) ([]fleetVariant, error) {
	out := []fleetVariant{}
	for _, spec := range specs {
		parts := strings.Split(strings.TrimSpace(spec), "/")
		if len(parts) != 2 {
			return nil, fmt.Errorf("fleet: variant %q: want concurrency/batch, e.g. 32/256", spec)
		}
		var v fleetVariant
		for i, f := range []struct {
			to    *int
			bound int
		}{{&v.Concurrency, activities.MaxStartConcurrency}, {&v.Batch, contract.MaxStartBatch}} {
			n, err := strconv.Atoi(parts[i])
			if parts[i] != "" && (err != nil || n < 1 || n > f.bound) {
				return nil, fmt.Errorf("fleet: variant %q: %q is not 1 to %d", spec, parts[i], f.bound)
			}
			*f.to = n
		}
		for _, w := range out {
			if w.String() == v.String() {
				return nil, fmt.Errorf("fleet: variant %q listed twice", spec)
			}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		out = []fleetVariant{{}}
	}
	return out, nil
}

// name labels the variant in tables, targets and plots: "demand" (the sweep's discovery) for
// the default, as in the reports of runs before --variants, else "demand 32/512".
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
