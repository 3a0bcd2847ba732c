package contract

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/target"
)

// The task-queue priority ladder (Temporal PriorityKey: lower runs first, 1 to 5 on a
// default server, 3 when unset). docs/OPERATIONS.md "Fair share across kinds" explains it.
const (
	// PrioritySweep: the sweep's workflow and activity tasks (SweepPriority), ahead of the
	// merges it starts.
	PrioritySweep = 1
	// PriorityUrgentMerge: a merge of a store that refuses writes (at its pending maximum)
	// or is far past its merge trigger (MergeWalInput.Urgent).
	PriorityUrgentMerge = 2
	// PriorityRoutineMerge: every other merge, and compaction (Temporal's default).
	PriorityRoutineMerge = 3
)

// Fairness weights: a kind's share of the merge task queues' dispatch under Temporal's
// task-queue fairness, which clamps a weight to [0.001, 1000]; walkeeper refuses one outside.
const (
	DefaultFairnessWeight = 1.0
	MinFairnessWeight     = 0.001
	MaxFairnessWeight     = 1000.0
)

// UrgentPastTriggerFactor: a merge whose store has at least this many times its merge
// threshold pending is urgent, since the merges in front of it kept it waiting long.
const UrgentPastTriggerFactor = 4

// MergePriority is the Temporal priority of a MergeWal run of kind and of its activities:
// urgent or routine, with the kind as fairness key so kinds take turns whatever their
// backlog, at weight (0 = DefaultFairnessWeight). Pure.
func MergePriority(kind target.Kind, urgent bool, weight float64) temporal.Priority {
	p := temporal.Priority{PriorityKey: PriorityRoutineMerge, FairnessKey: string(kind), FairnessWeight: float32(cmp.Or(weight, DefaultFairnessWeight))}
	if urgent {
		p.PriorityKey = PriorityUrgentMerge
	}
	return p
}

// fairnessWeightField checks a fairness weight: 0 (the default) or a finite number in
// [MinFairnessWeight, MaxFairnessWeight].
func fairnessWeightField(field string, w float64) error {
	if w == 0 {
		return nil
	}
	if math.IsNaN(w) || math.IsInf(w, 0) {
		return inputErrorf(field, "%v is not a number", w)
	}
	return inRange(field, w, MinFairnessWeight, MaxFairnessWeight)
}

// FairnessWeights maps a kind to its fairness weight; a kind not listed has
// DefaultFairnessWeight. The zero value weighs every kind equally.
type FairnessWeights map[target.Kind]float64

// Weight is k's weight.
func (w FairnessWeights) Weight(k target.Kind) float64 {
	if v, ok := w[k]; ok {
		return v
	}
	return DefaultFairnessWeight
}

// String is the weights as ParseFairnessWeights reads them, every kind listed in
// target.Kinds order: "rollout=1,generic=1,datagen=1".
func (w FairnessWeights) String() string {
	parts := make([]string, 0, len(target.Kinds))
	for _, k := range target.Kinds {
		parts = append(parts, string(k)+"="+strconv.FormatFloat(w.Weight(k), 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

// ParseFairnessWeights reads "kind=weight,..." (each kind once, weights in
// [MinFairnessWeight, MaxFairnessWeight], the others DefaultFairnessWeight); the invalid
// input error names the first bad entry.
func ParseFairnessWeights(s string) (FairnessWeights, error) {
	w := FairnessWeights{}
	if strings.TrimSpace(s) == "" {
		return w, nil
	}
	for _, entry := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return nil, fmt.Errorf("%w: fairness weights: %q is not kind=weight", target.ErrInvalidInput, Clip(entry, quotedMax))
		}
		k, err := target.ParseKind(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("fairness weights: %w", err)
		}
		if _, dup := w[k]; dup {
			return nil, fmt.Errorf("%w: fairness weights: kind %s is listed twice", target.ErrInvalidInput, k)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("%w: fairness weights: %s=%q is not a weight in [%g, %g]", target.ErrInvalidInput, k, Clip(val, quotedMax), MinFairnessWeight, MaxFairnessWeight)
		}
		if err := fairnessWeightField("fairness weights: "+string(k), v); err != nil {
			return nil, err
		}
		w[k] = v
	}
	return w, nil
}
