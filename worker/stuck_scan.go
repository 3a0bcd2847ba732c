package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
)

// Bounds of the stuck-run scan (docs/OPERATIONS.md, "A merge that cannot make progress").
const (
	// MinStuckScanInterval: a scan costs one visibility page and up to maxStuckDescribes
	// describes, so one a second is the most a worker may ask for.
	MinStuckScanInterval = time.Second
	MaxStuckScanInterval = time.Hour
	// maxStuckDescribes bounds one scan's cost: one visibility page of this size, one
	// DescribeWorkflowExecution per run on it. More running runs take more scans (stuckSweep).
	maxStuckDescribes = 100
	// minStuckScanTimeout bounds one scan when the interval is shorter: 100 describes of a
	// loaded frontend take seconds.
	minStuckScanTimeout = 30 * time.Second
)

// stuckScan looks, every interval, for MergeWal and CompactBase runs that cannot make
// progress, one listing page per scan: each is logged, counted in walkeeper_merge_runs_stuck,
// and terminated when past the deadline without a run timeout of its own, so the next trigger
// starts afresh. Every worker scans; the cost is reads, and two terminating one run race
// harmlessly.
type stuckScan struct {
	c         client.Client
	namespace string
	interval  time.Duration
	deadline  time.Duration // contract.RunTimeout of this worker's starts
	log       *zap.Logger
	metrics   *Metrics
	now       func() time.Time
	pageSize  int // runs listed and described per scan: maxStuckDescribes
	// sweep is the walk through the listing under way (nil: the next scan starts one).
	sweep *stuckSweep
}

// stuckSweep walks the listing of the runs older than one interval when it began, one page per
// scan, since visibility lists newest first and one page would never reach the oldest; the
// gauges are set at the last page.
type stuckSweep struct {
	query string // fixed at the walk's start, which keeps its page tokens valid
	token []byte // the next page; nil: the first
	stuck map[[2]string]int
}

// run scans every interval (±10 %, so the workers of a fleet spread out) until ctx ends.
func (s *stuckScan) run(ctx context.Context) {
	for {
		wait := time.Duration(float64(s.interval) * (0.9 + 0.2*rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sctx, cancel := context.WithTimeout(ctx, max(s.interval, minStuckScanTimeout))
		err := s.scan(sctx)
		cancel()
		result := "ok"
		if err != nil {
			result = "failed"
			if ctx.Err() == nil {
				s.log.Warn("stuck-run scan failed", zap.Error(err))
			}
		}
		s.metrics.stuckScans.WithLabelValues(result).Inc()
	}
}

// scan reads one page of the sweep (starting one when none is under way) and classifies,
// reports and terminates; a failed page starts the sweep over at the next scan.
func (s *stuckScan) scan(ctx context.Context) error {
	now := s.now()
	sw := s.sweep
	if sw == nil {
		// The running MergeWal and CompactBase runs started at least one interval ago.
		q := fmt.Sprintf(`(WorkflowType=%q OR WorkflowType=%q) AND ExecutionStatus="Running" AND StartTime < %q`,
			contract.MergeWalWorkflow, contract.CompactBaseWorkflow, now.Add(-s.interval).UTC().Format(time.RFC3339))
		sw = &stuckSweep{query: q, stuck: map[[2]string]int{}}
	}
	s.sweep = nil
	resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace:     s.namespace,
		PageSize:      int32(s.pageSize),
		Query:         sw.query,
		NextPageToken: sw.token,
	})
	if err != nil {
		return fmt.Errorf("list running merges: %w", err)
	}
	execs := resp.GetExecutions() // a server may answer more than the page asked for
	for _, e := range execs[:min(len(execs), s.pageSize)] {
		typ, id, runID := e.GetType().GetName(), e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
		d, err := s.c.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			if errors.As(err, new(*serviceerror.NotFound)) {
				continue // closed and gone since the listing
			}
			return fmt.Errorf("describe %s: %w", id, err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		st := DiagnoseRun(ctx, s.c, s.namespace, d, now, s.deadline)
		if st.Reason == "" {
			continue
		}
		sw.stuck[[2]string{typ, st.Reason}]++
		s.log.Warn("run cannot make progress", zap.String("workflow_id", id), zap.String("run_id", runID),
			zap.String("reason", st.Reason), zap.String("detail", st.Detail), zap.Duration("age", st.Age.Round(time.Second)),
			zap.Duration("deadline", st.Deadline), zap.Bool("own_run_timeout", st.OwnTimeout))
		if st.Terminable() {
			s.terminate(ctx, typ, id, runID, st)
		}
	}
	if sw.token = resp.GetNextPageToken(); len(sw.token) > 0 {
		s.sweep = sw
		return nil
	}
	s.metrics.setStuck(sw.stuck)
	return nil
}

// terminate ends a run past the deadline without a run timeout, saying why and what follows.
func (s *stuckScan) terminate(ctx context.Context, typ, id, runID string, st StuckRun) {
	reason := fmt.Sprintf("walkeeper: run cannot make progress (%s) and is past --merge-run-timeout %s; the next trigger starts a fresh run",
		st.Detail, st.Deadline)
	if err := s.c.TerminateWorkflow(ctx, id, runID, reason); err != nil {
		if !errors.As(err, new(*serviceerror.NotFound)) {
			s.log.Warn("could not terminate a stuck run", zap.String("workflow_id", id), zap.String("run_id", runID), zap.Error(err))
		}
		return // NotFound: closed already (another worker, or it finished)
	}
	s.metrics.runsTerminated.WithLabelValues(typ).Inc()
	s.log.Warn("terminated a stuck run", zap.String("workflow_id", id), zap.String("run_id", runID), zap.String("reason", reason))
}

// Why a running MergeWal or CompactBase run cannot make progress: the reason label of
// walkeeper_merge_runs_stuck, shared by the worker's stuck-run scan and `walkeeper status`.
const (
	// StuckWorkflowTask: its workflow task failed or timed out StuckWorkflowTaskAttempts
	// times in a row (a panic, a non-deterministic deploy); the run cannot take a step.
	StuckWorkflowTask = "workflow_task"
	// StuckActivity: an activity it waits on is at attempt StuckActivityAttempts or beyond,
	// which the retry policies of workflows/options.go only reach when a store or worker
	// keeps failing it.
	StuckActivity = "activity_retrying"
	// StuckPastDeadline: it runs longer than its run timeout allows, or, started without one,
	// longer than the deadline; the worker's scan terminates the latter.
	StuckPastDeadline = "past_deadline"
)

// StuckReasons lists the reasons in the order a run is classified.
var StuckReasons = []string{StuckWorkflowTask, StuckActivity, StuckPastDeadline}

const (
	// StuckWorkflowTaskAttempts: the server retries a failed workflow task at once and then
	// with backoff; a third attempt means the failure is not a one-off.
	StuckWorkflowTaskAttempts = 3
	// StuckActivityAttempts: the first retry of an activity is routine, the second is not.
	StuckActivityAttempts = 3
)

// StuckRun is why a running run cannot make progress (Reason "": it can, as the server shows).
type StuckRun struct {
	Reason string // one of StuckReasons, or ""
	// Detail says it for a human: "workflow task failing (attempt 7)", with the failure
	// DiagnoseRun read from the history.
	Detail string
	// PastDeadline: the run is older than its deadline (Deadline).
	PastDeadline bool
	// Deadline is the run's WorkflowRunTimeout, or the deadline the caller passed when the
	// run has none; OwnTimeout says which.
	Deadline   time.Duration
	OwnTimeout bool
	Age        time.Duration
}

// Terminable says that nothing but a terminate ends the run: it is past the deadline and
// has no run timeout of its own (started by hand), so Temporal will not end it.
func (s StuckRun) Terminable() bool { return s.PastDeadline && !s.OwnTimeout }

// classifyRun is why the described running run d cannot make progress at now. Pure.
func classifyRun(d *workflowservice.DescribeWorkflowExecutionResponse, now time.Time, deadline time.Duration) StuckRun {
	info := d.GetWorkflowExecutionInfo()
	s := StuckRun{Deadline: deadline, Age: now.Sub(info.GetStartTime().AsTime())}
	if rt := d.GetExecutionConfig().GetWorkflowRunTimeout(); rt != nil && rt.AsDuration() > 0 {
		s.Deadline, s.OwnTimeout = rt.AsDuration(), true
	}
	s.PastDeadline = s.Deadline > 0 && s.Age > s.Deadline
	if wt := d.GetPendingWorkflowTask(); wt != nil && wt.GetAttempt() >= StuckWorkflowTaskAttempts {
		s.Reason = StuckWorkflowTask
		s.Detail = fmt.Sprintf("workflow task failing (attempt %d)", wt.GetAttempt())
		return s
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetAttempt() >= StuckActivityAttempts {
			s.Reason = StuckActivity
			s.Detail = fmt.Sprintf("activity %s retrying (attempt %d", pa.GetActivityType().GetName(), pa.GetAttempt())
			if msg := pa.GetLastFailure().GetMessage(); msg != "" {
				s.Detail += ": " + contract.Clip(msg, 200)
			}
			s.Detail += ")"
			return s
		}
	}
	if s.PastDeadline {
		s.Reason = StuckPastDeadline
		s.Detail = fmt.Sprintf("running for %s, past its deadline %s", s.Age.Round(time.Second), s.Deadline)
	}
	return s
}

// DiagnoseRun is why the running run d cannot make progress at now (deadline bounds a run
// without a run timeout), with a failing workflow task's latest failure read from its history.
func DiagnoseRun(ctx context.Context, c client.Client, namespace string, d *workflowservice.DescribeWorkflowExecutionResponse, now time.Time, deadline time.Duration) StuckRun {
	s := classifyRun(d, now, deadline)
	if s.Reason != StuckWorkflowTask {
		return s
	}
	resp, err := c.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace:       namespace,
		Execution:       d.GetWorkflowExecutionInfo().GetExecution(),
		MaximumPageSize: stuckHistoryEvents,
	})
	if err != nil {
		return s
	}
	for _, e := range resp.GetHistory().GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			if msg := e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage(); msg != "" {
				s.Detail += ": " + contract.Clip(msg, 300)
			}
			return s
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			s.Detail += ": workflow task timed out"
			return s
		}
	}
	return s
}

// stuckHistoryEvents bounds the newest events read for the last workflow task failure: it is
// followed by at most a few events (signals, a transient task) when a run is stuck.
const stuckHistoryEvents = 20
