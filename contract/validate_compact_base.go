package contract

import "cmp"

// Defaults and bounds of CompactBaseInput (docs/TEMPORAL.md, "Workflow inputs").
const (
	// DefaultCompactMaxPasses and MaxCompactMaxPasses: passes of one CompactBase, each a
	// CompactBase activity.
	DefaultCompactMaxPasses  = 16
	MaxCompactMaxPasses      = 1000
	DefaultCompactTargetRuns = 4
	// MaxCompactRuns bounds max_runs (0 = the store's 16, -1 = every run, else at least 2:
	// rewriting one run changes nothing) and target_runs.
	MaxCompactRuns = 1024
	// CompactEveryRun is max_runs' "every run".
	CompactEveryRun = -1
	// MinCompactBytes and MaxCompactBytes bound max_bytes (0 = the store's default, itself
	// capped by the worker's merge budget).
	MinCompactBytes = 1 << 20
	MaxCompactBytes = 64 << 30
)

// WithDefaults is in with max_passes and target_runs set to their defaults when zero. Pure.
func (in CompactBaseInput) WithDefaults() CompactBaseInput {
	in.MaxPasses = cmp.Or(in.MaxPasses, DefaultCompactMaxPasses)
	in.TargetRuns = cmp.Or(in.TargetRuns, DefaultCompactTargetRuns)
	return in
}

// Validate checks every field of a CompactBase input against its bounds. Pure.
func (in CompactBaseInput) Validate() error {
	d := in.WithDefaults()
	maxRuns := error(nil)
	if in.MaxRuns != 0 && in.MaxRuns != CompactEveryRun && (in.MaxRuns < 2 || in.MaxRuns > MaxCompactRuns) {
		maxRuns = inputErrorf("max_runs", "%d: want 0 (the store's default), -1 (every run) or 2 to %d", in.MaxRuns, MaxCompactRuns)
	}
	return cmp.Or(
		in.decodeErr,
		targetField("target", in.Target),
		maxRuns,
		optional("max_bytes", &in.MaxBytes, MinCompactBytes, MaxCompactBytes),
		inRange("max_passes", d.MaxPasses, 1, MaxCompactMaxPasses),
		inRange("target_runs", d.TargetRuns, 1, MaxCompactRuns),
		triggerField("trigger", in.Trigger),
		textWithin("trigger_reason", in.TriggerReason, MaxTriggerReasonBytes),
	)
}
