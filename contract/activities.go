package contract

import "time"

// ListPendingShardsParams names the store whose shards to list.
type ListPendingShardsParams struct {
	Target string `json:"target"`
}

// ShardPending is one shard's merge debt.
type ShardPending struct {
	Shard         string    `json:"shard"`
	Pending       int       `json:"pending"`
	PendingBytes  int64     `json:"pending_bytes"`
	Watermark     uint64    `json:"watermark"`
	OldestPending time.Time `json:"oldest_pending,omitzero"`
}

// MaxListedShards caps the shards one ListPendingShards result lists, so that it stays under
// MaxPayloadBytes (about 230 bytes a worst-case entry) and well under MaxCarriedShards.
const MaxListedShards = 1024

// ListPendingShardsResult lists the shards with pending generations, in shard order: at
// most MaxListedShards of them, those whose oldest pending generation is oldest.
type ListPendingShardsResult struct {
	Shards []ShardPending `json:"shards"`
	// Unlisted counts the pending shards left out by the cap; a later MergeWal merges them.
	Unlisted int `json:"unlisted,omitempty"`
}

// PrepareParams asks for one merge preparation of one shard (docs/FORMAT.md §5 step 1).
type PrepareParams struct {
	Target string `json:"target"`
	Shard  string `json:"shard"`
	// MaxGenerations and MaxBytes override the worker's defaults when set (0 = no cap of
	// their own: the pass's generation ceiling and the merge budget still bound it).
	MaxGenerations *int   `json:"max_generations,omitempty"`
	MaxBytes       *int64 `json:"max_bytes,omitempty"`
	// NotifyAfter asks the activity to send ActivityStateSignal on state changes a workflow
	// cannot see (budget wait, retry backoff); 0 = no signals at all.
	NotifyAfter time.Duration `json:"notify_after,omitempty"`
}

// PrepareResult carries the prepared merge, or nil when the shard had nothing pending.
type PrepareResult struct {
	Prepared *PreparedMerge `json:"prepared,omitempty"`
}

// PrepareProgress is Prepare's heartbeat detail.
type PrepareProgress struct {
	// State is PrepareStateStarting, then ActivityStateWaitingBudget while it appears to
	// wait for the budget, then ActivityStateRunning once a generation has been read.
	State string `json:"state"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

// MaxRoundShards caps the prepared merges of one CommitRound (store.MaxRoundShards, kept
// equal by a test in activities); a round closes once they encode to MaxRoundBytes (at least
// one is taken), a quarter of the 256 KiB payload budget even with long keys.
const (
	MaxRoundShards = 64
	MaxRoundBytes  = 64 << 10
)

// CommitRoundParams publishes the prepared merges of several shards of one table in one
// base version (docs/DESIGN.md §3, round commits): at most MaxRoundShards, distinct shards.
type CommitRoundParams struct {
	Target   string          `json:"target"`
	Prepared []PreparedMerge `json:"prepared"`
	// NotifyAfter: see PrepareParams.
	NotifyAfter time.Duration `json:"notify_after,omitempty"`
}

// Round outcomes of one shard (RoundShardResult.Outcome).
const (
	// RoundCommitted: the round's base version published the shard's pass.
	RoundCommitted = "committed"
	// RoundAlreadyCommitted: the watermark already covered the pass (a retried round, or
	// another attempt merged the same generations); nothing was published for it again.
	RoundAlreadyCommitted = "already_committed"
	// RoundStale: the preparation can never publish; it was left out of the version and
	// the workflow aborts it and prepares the shard again.
	RoundStale = "stale"
)

// RoundShardResult is one shard's outcome in a CommitRound, in the order of the input.
type RoundShardResult struct {
	Shard       string `json:"shard"`
	Outcome     string `json:"outcome"`
	BaseVersion uint64 `json:"base_version,omitempty"`
	Reclaimed   int    `json:"reclaimed,omitempty"`
	// Reason says why a shard is stale.
	Reason string `json:"reason,omitempty"`
}

// CommitRoundResult reports one CommitRound. BaseVersion is the version it published (0
// when every shard was already committed or stale).
type CommitRoundResult struct {
	BaseVersion uint64             `json:"base_version,omitempty"`
	Shards      []RoundShardResult `json:"shards"`
}

// AbortParams discards a prepared merge whose commit is proven absent.
type AbortParams struct {
	Prepared PreparedMerge `json:"prepared"`
}

// AbortResult reports one abort. CommitPresent means the merge did commit after all;
// CommittedByAnother, that another attempt's run published it and reports the pass (decision
// 0781), a negative so that an older worker's answer counts the pass.
type AbortResult struct {
	Deleted            int  `json:"deleted"`
	CommitPresent      bool `json:"commit_present,omitempty"`
	CommittedByAnother bool `json:"committed_by_another,omitempty"`
}

// CompactPassParams bounds one compaction pass (activity CompactBase; the workflow of the
// same name takes CompactBaseInput).
type CompactPassParams struct {
	Target   string `json:"target"`
	MaxRuns  int    `json:"max_runs,omitempty"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
	// NotifyAfter: see PrepareParams.
	NotifyAfter time.Duration `json:"notify_after,omitempty"`
}

// CompactPassResult reports one compaction pass (activity CompactBase).
type CompactPassResult struct {
	BaseVersion    uint64 `json:"base_version"`
	InputRuns      int    `json:"input_runs"`
	OutputRuns     int    `json:"output_runs"`
	RowsIn         int64  `json:"rows_in"`
	RowsOut        int64  `json:"rows_out"`
	DroppedDeletes int64  `json:"dropped_deletes"`
	RunsLeft       int    `json:"runs_left"`
	Committed      bool   `json:"committed"`
	// AbandonedOutputs counts the unpublished outputs of earlier passes this pass deleted.
	AbandonedOutputs int `json:"abandoned_outputs,omitempty"`
}

// StartRequest asks for one workflow start: Workflow is MergeWalWorkflow or
// CompactBaseWorkflow.
type StartRequest struct {
	Workflow string `json:"workflow"`
	Target   string `json:"target"`
	// ParallelPrepare asks a MergeWal start for parallel prepares (MergeWalInput).
	ParallelPrepare bool `json:"parallel_prepare,omitempty"`
	// Trigger and Reason become the started workflow's Trigger and TriggerReason.
	Trigger string `json:"trigger,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Urgent becomes a MergeWal start's MergeWalInput.Urgent (the sweep's verdict from the
	// target's demand).
	Urgent bool `json:"urgent,omitempty"`
	// Pending is the target's pending generations as the sweep saw them, which a MergeWal
	// start carries in WalPending and WalPendingAtStart; 0 or less = unknown.
	Pending int `json:"pending,omitempty"`
}

// StartWorkflowsParams is a batch of starts.
type StartWorkflowsParams struct {
	Starts []StartRequest `json:"starts"`
}

// StartOutcome reports one start. Temporal does not tell a fresh start from an attach to a
// running execution (conflict policy USE_EXISTING), so both report the run they reached.
type StartOutcome struct {
	Workflow   string `json:"workflow"`
	Target     string `json:"target"`
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// Error is why the start failed, cut by StartErrorText so a batch of outcomes stays under
	// MaxPayloadBytes (the activity logs the whole error).
	Error string `json:"error,omitempty"`
}

// StartWorkflowsResult reports every start of the batch, in request order.
type StartWorkflowsResult struct {
	Outcomes []StartOutcome `json:"outcomes"`
}

// Activity states carried by ActivityStateSignal.
const (
	// ActivityStateRunning: the activity runs (it is past any slot wait).
	ActivityStateRunning = "running"
	// ActivityStateWaitingBudget: Prepare waits for the process merge memory budget.
	ActivityStateWaitingBudget = "waiting_budget"
	// ActivityStateRetrying: the attempt failed with a retryable error; Temporal backs off
	// before the next attempt.
	ActivityStateRetrying = "retrying"
)

// PrepareStateStarting: Prepare is loading manifests or reserving memory (heartbeat detail
// only; never signalled).
const PrepareStateStarting = "starting"

// ActivityState is the payload of ActivityStateSignal.
type ActivityState struct {
	ActivityID string `json:"activity_id"`
	State      string `json:"state"`
	Attempt    int    `json:"attempt"`
	Error      string `json:"error,omitempty"`
}
