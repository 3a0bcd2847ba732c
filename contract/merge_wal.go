package contract

import (
	"slices"
	"time"
)

// MergeWalInput is MergeWal's input. Only Target is required:
// `{"target":"generic:gs"}`. Durations are JSON nanoseconds. Validate bounds every field.
type MergeWalInput struct {
	Target string `json:"target"`
	// MaxGenerations and MaxBytes cap one pass (nil = the worker's merge_max_generations /
	// merge_max_bytes; 0 = no cap of their own, the merge budget still bounds a pass).
	MaxGenerations *int   `json:"max_generations,omitempty"`
	MaxBytes       *int64 `json:"max_bytes,omitempty"`
	// ParallelPrepare lets prepares of different shards run concurrently, at most
	// PrepareConcurrency at once (default 4). Commits stay one at a time either way.
	ParallelPrepare    bool `json:"parallel_prepare,omitempty"`
	PrepareConcurrency int  `json:"prepare_concurrency,omitempty"`
	// MaxPasses bounds the passes per shard over the whole merge, continue-as-new included
	// (default 1000), so writers that seal faster than merges fold cannot keep it running.
	MaxPasses int `json:"max_passes,omitempty"`
	// ScheduleToStartTimeout is how long Prepare waits on the shard owner's queue
	// before falling back to the shared queue (default 30s).
	ScheduleToStartTimeout time.Duration `json:"schedule_to_start_timeout,omitempty"`
	// SlotWaitThreshold: an activity that no worker has started this long after it was
	// scheduled is reported as waiting for a slot (default 10s, negative = off).
	SlotWaitThreshold time.Duration `json:"slot_wait_threshold,omitempty"`
	// PrepareTimeout bounds one Prepare attempt, budget wait included (default 30m).
	PrepareTimeout time.Duration `json:"prepare_timeout,omitempty"`
	// PassesPerWorkflowRun: continue-as-new after this many committed passes (default 100),
	// or earlier when Temporal suggests it or the run is half its run timeout old (JSON
	// "passes_per_run", kept for existing callers).
	PassesPerWorkflowRun int `json:"passes_per_run,omitempty"`
	// Carry is progress handed over by continue-as-new; a start that sets it fails
	// (a run trusts a carry only from its own chain's continue-as-new).
	Carry *MergeWalCarry `json:"carry,omitempty"`
	// Trigger says who started the merge (one of Triggers; empty = TriggerUnknown) and
	// TriggerReason why, in words; the start helpers copy them into WalTrigger, the memo and
	// the run's summary.
	Trigger       string `json:"trigger,omitempty"`
	TriggerReason string `json:"trigger_reason,omitempty"`
	// MaxShardsPerCommit caps the shards one CommitRound publishes: 0 = MaxRoundShards, 1 =
	// one shard per round.
	MaxShardsPerCommit int `json:"max_shards_per_commit,omitempty"`
	// Urgent: the starter found the store refusing writes or far past its merge trigger;
	// the run and its activities take PriorityUrgentMerge (MergePriority).
	Urgent bool `json:"urgent,omitempty"`
	// FairnessWeight is the kind's fairness weight the starter was configured with (0 =
	// DefaultFairnessWeight), carried so the whole chain uses the weight recorded at start.
	FairnessWeight float64 `json:"fairness_weight,omitempty"`
	decodeErr      error
}

// MergeWalCarry is the state one run hands to the next over continue-as-new.
type MergeWalCarry struct {
	// WorkflowRuns counts the workflow runs of the continue-as-new chain so far (JSON "runs":
	// the tag is in recorded histories and stays).
	WorkflowRuns int                `json:"runs"`
	Shards       []ShardMergeResult `json:"shards"`
	// PendingAtStart is the total pending generations of the chain's first listing
	// (WalPendingAtStart).
	PendingAtStart int `json:"pending_at_start,omitempty"`
	// Actions is the Temporal actions the chain's earlier runs recorded (MergeWalResult.Actions).
	Actions int `json:"actions,omitempty"`
}

// ShardMergeResult is one shard's outcome.
type ShardMergeResult struct {
	Shard       string `json:"shard"`
	Reclaimed   int    `json:"reclaimed"`
	Passes      int    `json:"passes"`
	BaseVersion uint64 `json:"base_version,omitempty"`
	// Pending is the estimated number of generations left.
	Pending int `json:"pending"`
	// Restarts counts stale preparations that were aborted and prepared again.
	Restarts int `json:"restarts,omitempty"`
	// SharedQueue: the owner's queue did not pick up work in time; the shard was merged
	// through the shared queue.
	SharedQueue bool `json:"shared_queue,omitempty"`
	// Finished: nothing pending, MaxPasses reached, or failed.
	Finished         bool   `json:"finished"`
	MaxPassesReached bool   `json:"max_passes_reached,omitempty"`
	Error            string `json:"error,omitempty"`
	ErrorType        string `json:"error_type,omitempty"`
	// Permanent: the error cannot go away by retrying (corrupt data, invalid input...).
	Permanent bool `json:"permanent,omitempty"`
	// BytesMerged is the in-memory size of the rows the committed passes read
	// (PreparedMerge.Bytes summed).
	BytesMerged int64 `json:"bytes_merged,omitempty"`
}

// MergeWalResult is MergeWal's result: the totals of every shard, and per-shard reclaimed
// generations, versions and errors of at most MaxResultShards of them (CapShards).
type MergeWalResult struct {
	Target string `json:"target"`
	// Shards lists the failed shards first, then the others, each group in shard order (a
	// result recorded without ShardsFailed may list every shard in shard order).
	Shards      []ShardMergeResult `json:"shards"`
	Reclaimed   int                `json:"reclaimed"`
	Passes      int                `json:"passes"`
	BaseVersion uint64             `json:"base_version,omitempty"`
	// WorkflowRuns counts the workflow runs of the continue-as-new chain (JSON "runs": the tag
	// is in recorded histories and stays).
	WorkflowRuns int `json:"runs"`
	// BytesMerged sums the shards' BytesMerged; PendingAtStart is the total pending
	// generations the merge found at its first listing (WalPendingAtStart).
	BytesMerged    int64 `json:"bytes_merged,omitempty"`
	PendingAtStart int   `json:"pending_at_start,omitempty"`
	// Actions is the billable Temporal actions the chain recorded as the workflow counts its
	// own commands; a retry no signal reported is billed but not counted (the history's
	// count, internal/actioncount, is exact).
	Actions int `json:"actions,omitempty"`
	// ShardsOmitted counts the shards left out of Shards; ShardsFailed counts the failed
	// shards, listed or not.
	ShardsOmitted int `json:"shards_omitted,omitempty"`
	ShardsFailed  int `json:"shards_failed,omitempty"`
}

// Per-shard phases.
const (
	ShardQueued        = "queued"
	ShardPreparing     = "preparing"
	ShardWaitingCommit = "waiting-commit"
	ShardCommitting    = "committing"
	ShardAborting      = "aborting"
	ShardDone          = "done"
	ShardFailed        = "failed"
)

// MergeWalStatus answers the status query.
type MergeWalStatus struct {
	Target string `json:"target"`
	Phase  string `json:"phase"`
	// Shard and Pass describe the most recent step.
	Shard     string `json:"shard,omitempty"`
	Pass      int    `json:"pass"`
	Pending   int    `json:"pending"`
	Reclaimed int    `json:"reclaimed"`
	// Blocked says why the merge is not progressing, or is empty.
	Blocked string `json:"blocked,omitempty"`
	// WorkflowRun is the number of this workflow run in the continue-as-new chain, from 1
	// (JSON "run", kept for existing clients).
	WorkflowRun int `json:"run"`
	// Shards lists at most MaxStatusShards shards, in flight first, then failed, queued and
	// done (CapShards); ShardsOmitted counts the rest, so the answer stays far below
	// Temporal's 4 MiB query limit.
	Shards        []ShardStatus `json:"shards"`
	ShardsOmitted int           `json:"shards_omitted,omitempty"`
	// InFlight lists the activities the run waits on and SlotWait its slot-wait threshold,
	// for ApplyPending.
	InFlight []InFlightActivity `json:"in_flight,omitempty"`
	SlotWait time.Duration      `json:"slot_wait,omitempty"`
	// RefusedSignals counts the ActivityStateSignal payloads this run refused because they
	// did not decode (anyone with namespace access can send one); the run went on.
	RefusedSignals int `json:"refused_signals,omitempty"`
	// IgnoredFields names members of the run's input that no field took, mistyped or of a
	// later build (at most MaxUnknownFieldNames; UnknownInputFields); the run went on without.
	IgnoredFields []string `json:"ignored_fields,omitempty"`
}

// ShardStatus is one shard's part of MergeWalStatus.
type ShardStatus struct {
	Shard     string `json:"shard"`
	Phase     string `json:"phase"`
	Pending   int    `json:"pending"`
	Passes    int    `json:"passes"`
	Reclaimed int    `json:"reclaimed"`
	Queue     string `json:"queue,omitempty"`
	Blocked   string `json:"blocked,omitempty"`
	Error     string `json:"error,omitempty"`
}

// MaxResultShards bounds the per-shard entries of a MergeWalResult, so the result stays
// within a few hundred KiB however many shards a store has: an entry is about 150 bytes, a
// failed one up to MaxFailureTextBytes more.
const MaxResultShards = 32

// MaxCarryErrorBytes bounds each shard's failure text in a MergeWal carry as JSON encodes it
// (escapes included, CarryErrorText), so that MaxCarriedShards shards carry about 1.6 MB,
// under the 2 MiB Temporal refuses a payload at.
const MaxCarryErrorBytes = 128

// CarryErrorText is s cut on a rune boundary with "…" so that its JSON encoding takes at most
// MaxCarryErrorBytes: a byte bound lets escaping grow a carry of failed shards sixfold. Pure.
func CarryErrorText(s string) string {
	return clipJSON(s, MaxCarryErrorBytes)
}

// MaxStatusShards bounds the shards a status answer lists and MaxStatusErrorBytes each one's
// error as JSON encodes it (escapes included), so the answer stays under MaxPayloadBytes; 128
// covers every shard a run has in flight.
const (
	MaxStatusShards     = 128
	MaxStatusErrorBytes = 1 << 10
)

// statusRank orders a status answer's shards: in flight, failed, queued, done.
func statusRank(phase string) int {
	return slices.Index([]string{ShardFailed, ShardQueued, ShardDone}, phase) + 1 // any phase in flight: 0
}

// CapShards is st with at most n shards listed, those in flight first, then the failed,
// queued and done ones, each group in the order st lists them, and every listed error cut
// to MaxStatusErrorBytes of JSON; ShardsOmitted counts the rest. Pure.
func (st MergeWalStatus) CapShards(n int) MergeWalStatus {
	all := slices.Clone(st.Shards)
	slices.SortStableFunc(all, func(a, b ShardStatus) int { return statusRank(a.Phase) - statusRank(b.Phase) })
	st.Shards = all[:min(n, len(all))]
	for i := range st.Shards {
		st.Shards[i].Error = clipJSON(st.Shards[i].Error, MaxStatusErrorBytes)
	}
	st.ShardsOmitted = len(all) - len(st.Shards)
	return st
}

// CapShards is res with at most n shards listed, failed shards first, then the others, each
// group in the order res lists them; ShardsOmitted counts the rest and ShardsFailed every
// failed shard. The totals stay those of every shard. Pure.
func (res MergeWalResult) CapShards(n int) MergeWalResult {
	var failed, others []ShardMergeResult
	for _, sh := range res.Shards {
		if sh.Error != "" {
			failed = append(failed, sh)
		} else {
			others = append(others, sh)
		}
	}
	all := append(append(make([]ShardMergeResult, 0, len(res.Shards)), failed...), others...)
	res.ShardsFailed = len(failed)
	res.Shards = all[:min(n, len(all))]
	res.ShardsOmitted = len(all) - len(res.Shards)
	return res
}

// CutErrors is res with each listed shard's error cut to MaxFailureTextBytes of JSON
// (FailureTextJSON), so that MaxResultShards failed shards stay under MaxPayloadBytes where
// escaping grows 4 KiB of text to 24 KiB. Pure.
func (res MergeWalResult) CutErrors() MergeWalResult {
	res.Shards = slices.Clone(res.Shards)
	for i := range res.Shards {
		res.Shards[i].Error = FailureTextJSON(res.Shards[i].Error)
	}
	return res
}
