package contract

import (
	"cmp"
	"strings"
	"time"
)

// Defaults and bounds of MergeWalInput (docs/TEMPORAL.md, "Workflow inputs").
const (
	// DefaultMergeMaxPasses and MaxMergeMaxPasses: passes per shard over the whole chain.
	// Each pass is at least a Prepare and its part of a CommitRound, so the ceiling bounds
	// what one start can cost per shard.
	DefaultMergeMaxPasses = 1000
	MaxMergeMaxPasses     = 10_000
	// DefaultPassesPerWorkflowRun and MaxPassesPerWorkflowRun: committed passes before
	// continue-as-new (a run also continues when Temporal suggests it or at RunContinueAfter).
	DefaultPassesPerWorkflowRun = 100
	MaxPassesPerWorkflowRun     = 1000
	// DefaultPrepareConcurrency and MaxPrepareConcurrency: prepares of one merge at once
	// with parallel_prepare; a round commit takes at most MaxRoundShards shards anyway.
	DefaultPrepareConcurrency = 4
	MaxPrepareConcurrency     = MaxRoundShards
	// MaxMergeGenerations bounds max_generations (0 = no cap: the worker's merge budget
	// still bounds a pass's memory).
	MaxMergeGenerations = 100_000
	MinMergeBytes       = 1 << 20
	MaxMergeBytes       = 64 << 30
	// Schedule-to-start on the owner's queue before the shared queue takes over: below a
	// second every Prepare would time out and run twice.
	DefaultScheduleToStartTimeout = 30 * time.Second
	MinScheduleToStartTimeout     = time.Second
	MaxScheduleToStartTimeout     = time.Hour
	// Slot-wait threshold (negative = off): every activity signals its workflow once it
	// passes, so a tiny one would turn every activity into an extra signal.
	DefaultSlotWaitThreshold = 10 * time.Second
	MinSlotWaitThreshold     = time.Second
	MaxSlotWaitThreshold     = time.Hour
	// One Prepare attempt, budget wait included: a prepare that times out is retried, so a
	// tiny timeout would only multiply attempts.
	DefaultPrepareTimeout = 30 * time.Minute
	MinPrepareTimeout     = 10 * time.Second
	MaxPrepareTimeout     = 24 * time.Hour
	// MaxTriggerReasonBytes bounds trigger_reason, which becomes the run's summary and memo.
	MaxTriggerReasonBytes = 1024
	// MaxCarriedShards bounds the shards a MergeWal carry lists, far more than a store has
	// writers, so the carry stays under Temporal's 2 MiB payload limit.
	MaxCarriedShards = 4096
	// MaxCarriedRuns bounds the workflow-run counters carried across continue-as-new.
	MaxCarriedRuns = 1_000_000
	// maxShardIDBytes is the store's bound on a shard id (store.validateShardID).
	maxShardIDBytes = 64
	// MaxCarriedActions bounds a carry's action count: far beyond MaxCarriedRuns runs of
	// a few actions per pass.
	MaxCarriedActions = 1 << 40

	// maxCarriedErrorBytes and maxErrorTypeBytes bound the error text a carry repeats.
	maxCarriedErrorBytes = 64 << 10
	maxErrorTypeBytes    = 64
)

// WithDefaults is in with every zero knob the workflow carries at its default
// (max_shards_per_commit stays 0, which the round commit reads as MaxRoundShards). Pure.
func (in MergeWalInput) WithDefaults() MergeWalInput {
	in.MaxPasses = cmp.Or(in.MaxPasses, DefaultMergeMaxPasses)
	in.PassesPerWorkflowRun = cmp.Or(in.PassesPerWorkflowRun, DefaultPassesPerWorkflowRun)
	in.PrepareConcurrency = cmp.Or(in.PrepareConcurrency, DefaultPrepareConcurrency)
	in.ScheduleToStartTimeout = cmp.Or(in.ScheduleToStartTimeout, DefaultScheduleToStartTimeout)
	in.SlotWaitThreshold = cmp.Or(in.SlotWaitThreshold, DefaultSlotWaitThreshold)
	in.PrepareTimeout = cmp.Or(in.PrepareTimeout, DefaultPrepareTimeout)
	return in
}

// Validate checks every field of a MergeWal input against its bounds, a carry for shape
// (its provenance is the workflow's to check). Pure.
func (in MergeWalInput) Validate() error {
	d := in.WithDefaults()
	err := cmp.Or(
		in.decodeErr,
		targetField("target", in.Target),
		optional("max_generations", in.MaxGenerations, 1, MaxMergeGenerations),
		optional("max_bytes", in.MaxBytes, MinMergeBytes, MaxMergeBytes),
		inRange("prepare_concurrency", d.PrepareConcurrency, 1, MaxPrepareConcurrency),
		inRange("max_passes", d.MaxPasses, 1, MaxMergeMaxPasses),
		inRange("schedule_to_start_timeout", d.ScheduleToStartTimeout, MinScheduleToStartTimeout, MaxScheduleToStartTimeout),
		offOrInRange("slot_wait_threshold", d.SlotWaitThreshold, MinSlotWaitThreshold, MaxSlotWaitThreshold),
		inRange("prepare_timeout", d.PrepareTimeout, MinPrepareTimeout, MaxPrepareTimeout),
		inRange("passes_per_run", d.PassesPerWorkflowRun, 1, MaxPassesPerWorkflowRun),
		triggerField("trigger", in.Trigger),
		textWithin("trigger_reason", in.TriggerReason, MaxTriggerReasonBytes),
		inRange("max_shards_per_commit", cmp.Or(in.MaxShardsPerCommit, MaxRoundShards), 1, MaxRoundShards),
		fairnessWeightField("fairness_weight", in.FairnessWeight),
	)
	if err != nil || in.Carry == nil {
		return err
	}
	return within("carry", in.Carry.validate(d.MaxPasses))
}

// validate checks a carry's shape: counters in range, at most MaxCarriedShards shards with
// valid, distinct ids, none with more passes than the chain allows. Pure.
func (c MergeWalCarry) validate(maxPasses int) error {
	err := cmp.Or(
		inRange("runs", c.WorkflowRuns, 1, MaxCarriedRuns),
		notNegative("pending_at_start", c.PendingAtStart),
		inRange("actions", c.Actions, 0, MaxCarriedActions),
	)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(c.Shards))
	return eachWithin("shards", "shards", c.Shards, MaxCarriedShards, func(sh ShardMergeResult) error {
		if err := sh.validate(maxPasses); err != nil {
			return err
		}
		if seen[sh.Shard] {
			return inputErrorf("shard", "%q is listed twice", sh.Shard)
		}
		seen[sh.Shard] = true
		return nil
	})
}

// validate checks one carried shard result. Pure.
func (r ShardMergeResult) validate(maxPasses int) error {
	return cmp.Or(
		shardField("shard", r.Shard),
		notNegative("reclaimed", r.Reclaimed),
		inRange("passes", r.Passes, 0, maxPasses),
		notNegative("pending", r.Pending),
		notNegative("restarts", r.Restarts),
		inRange("bytes_merged", r.BytesMerged, 0, 1<<62),
		lengthWithin("error", r.Error, maxCarriedErrorBytes),
		lengthWithin("error_type", r.ErrorType, maxErrorTypeBytes),
	)
}

// Validate checks MergeWalTick's only field. Pure.
func (in MergeWalTickInput) Validate() error {
	return cmp.Or(in.decodeErr, targetField("target", in.Target))
}

// shardField checks a shard id by the store's rule: 1 to 64 bytes, no '/', '\\' or ':', no
// "..", so it is one path segment and one task-queue suffix.
func shardField(field, s string) error {
	switch {
	case s == "":
		return inputErrorf(field, "required")
	case strings.ContainsAny(s, `/\:`) || strings.Contains(s, ".."):
		return inputErrorf(field, "%q must not contain '/', '\\', ':' or \"..\"", Clip(s, quotedMax))
	}
	return textWithin(field, s, maxShardIDBytes)
}

// triggerField checks a trigger: empty (unknown) or one of Triggers.
func triggerField(field, s string) error {
	return oneOf(field, s, append([]string{""}, Triggers...)...)
}

// lengthWithin bounds text produced by walkeeper's own code (error messages, which may span
// lines), carried across continue-as-new.
func lengthWithin(field, s string, maxBytes int) error {
	if len(s) > maxBytes {
		return inputErrorf(field, "%d bytes long, at most %d allowed", len(s), maxBytes)
	}
	return nil
}
