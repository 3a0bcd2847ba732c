package contract

import "github.com/walkeeper/walkeeper/target"

// Task queues (docs/DESIGN.md §4).
const (
	// TaskQueue is the shared queue: workflows, demand scans, round commits, clean-up, and
	// the Prepare of shards whose owner does not pick up its own queue in time.
	TaskQueue = "walkeeper"
	// ShardQueuePrefix prefixes each writer's own queue; see ShardQueue.
	ShardQueuePrefix = "walkeeper-shard-"
)

// ShardQueue is the task queue served by the owner of shard.
func ShardQueue(shard string) string { return ShardQueuePrefix + shard }

// Workflow type names: workflows are registered under these, never Go identifiers, so a rename
// cannot break a running history.
const (
	MergeWalWorkflow         = "MergeWal"
	CompactBaseWorkflow      = "CompactBase"
	MaintenanceSweepWorkflow = "MaintenanceSweep"
	// MergeWalTickWorkflow is the action of per-target schedules: it only starts (or attaches
	// to) MergeWal under its real ID, because schedule-started IDs carry a timestamp suffix.
	MergeWalTickWorkflow = "MergeWalTick"
	// SweepWindowWorkflow is the action of the sweep schedule: sweep rounds for one window
	// (sweep_window.go).
	SweepWindowWorkflow = "SweepWindow"
	// ReconcileDemandWorkflow rebuilds the demand index from the registry (demand.go).
	ReconcileDemandWorkflow = "ReconcileDemand"
)

// Activity type names, registered by activities.Register.
const (
	ListPendingShardsActivity = "ListPendingShards"
	PrepareActivity           = "Prepare"
	CommitRoundActivity       = "CommitRound"
	AbortActivity             = "Abort"
	CompactBaseActivity       = "CompactBase"
	StartWorkflowsActivity    = "StartWorkflows"
	ScanDemandActivity        = "ScanDemand"
	ReconcilePageActivity     = "ReconcilePage"
	RecordMaintenanceActivity = "RecordMaintenance"
)

// StatusQuery answers with MergeWalStatus on MergeWal and CompactBaseStatus on CompactBase.
const StatusQuery = "status"

// ActivityStateSignal carries ActivityState from a running activity to its workflow, for what
// the status query cannot observe: running, waiting for the budget, or backing off.
const ActivityStateSignal = "walkeeper-activity-state"

// MetricRefusedSignals is the SDK counter a workflow adds 1 to, through its replay-safe
// workflow.GetMetricsHandler, for each signal whose payload it refused; MetricTagWorkflow
// names the workflow type and MetricTagSignal the signal. The worker exports it to
// Prometheus; a run's status counts them too.
const (
	MetricRefusedSignals = "walkeeper_workflow_refused_signals"
	MetricTagWorkflow    = "workflow"
	MetricTagSignal      = "signal"
)

// MetricIgnoredInputFields is the SDK counter a run adds to, through its replay-safe
// workflow.GetMetricsHandler, the number of its input's members that no field takes
// (UnknownInputFields), tagged with MetricTagWorkflow; the worker exports it to Prometheus.
const MetricIgnoredInputFields = "walkeeper_workflow_ignored_input_fields"

// MergeWalID is the workflow ID of t's merge: "merge-wal/<kind>/<name>".
func MergeWalID(t target.Target) string { return "merge-wal/" + t.Path() }

// CompactID is the workflow ID of t's base compaction: "compact/<kind>/<name>".
func CompactID(t target.Target) string { return "compact/" + t.Path() }
