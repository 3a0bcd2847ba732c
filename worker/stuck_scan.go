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
	DefaultStuckScanInterval = time.Minute
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
		if err != nil && ctx.Err() == nil {
			s.log.Warn("stuck-run scan failed", zap.Error(err))
		}
		s.metrics.stuckScanned(err)
	}
}

// stuckQuery lists the running MergeWal and CompactBase runs started at least interval ago.
func stuckQuery(now time.Time, interval time.Duration) string {
	return fmt.Sprintf(`(WorkflowType=%q OR WorkflowType=%q) AND ExecutionStatus="Running" AND StartTime < %q`,
		contract.MergeWalWorkflow, contract.CompactBaseWorkflow, now.Add(-interval).UTC().Format(time.RFC3339))
}

// scan reads one page of the sweep (starting one when none is under way) and classifies,
// reports and terminates; a failed page starts the sweep over at the next scan.
func (s *stuckScan) scan(ctx context.Context) error {
	now := s.now()
	sw := s.sweep
	if sw == nil {
		sw = &stuckSweep{query: stuckQuery(now, s.interval), stuck: map[[2]string]int{}}
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
	for i, e := range resp.GetExecutions() {
		if i == s.pageSize {
			break
		}
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
	err := s.c.TerminateWorkflow(ctx, id, runID, reason)
	if err != nil {
		if !errors.As(err, new(*serviceerror.NotFound)) {
			s.log.Warn("could not terminate a stuck run", zap.String("workflow_id", id), zap.String("run_id", runID), zap.Error(err))
		}
		return // NotFound: closed already (another worker, or it finished)
	}
	s.metrics.stuckTerminated(typ)
	s.log.Warn("terminated a stuck run", zap.String("workflow_id", id), zap.String("run_id", runID), zap.String("reason", reason))
}
