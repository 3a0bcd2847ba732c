package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// Two workers scan the same namespace at once on a real dev server: a MergeWal started by
// hand without a run timeout whose workflow task always fails is terminated exactly once; one
// that fails the same way but has a run timeout is reported and left to Temporal; a healthy
// CompactBase is neither. The scans' clock is an hour ahead, so every run is old enough to be
// described and the hand-started one is past the deadline.
func TestStuckScanOnTwoWorkersTerminatesOnce(t *testing.T) {
	testtemporal.SkipShort(t)
	_, c := testtemporal.Start(t)
	const queue = "stuck-scan-test"
	w := tworker.New(c, queue, tworker.Options{})
	w.RegisterWorkflowWithOptions(func(workflow.Context, contract.MergeWalInput) (contract.MergeWalResult, error) {
		panic("broken deploy")
	}, workflow.RegisterOptions{Name: contract.MergeWalWorkflow})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ contract.CompactBaseInput) (contract.CompactBaseResult, error) {
		return contract.CompactBaseResult{}, workflow.Sleep(ctx, time.Hour)
	}, workflow.RegisterOptions{Name: contract.CompactBaseWorkflow})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(id, typ string, runTimeout time.Duration, in any) client.WorkflowRun {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowRunTimeout: runTimeout}, typ, in)
		require.NoError(t, err)
		return run
	}
	byHand := start("merge-wal/generic/by-hand", contract.MergeWalWorkflow, 0, contract.MergeWalInput{})
	timed := start("merge-wal/generic/timed", contract.MergeWalWorkflow, 2*time.Hour, contract.MergeWalInput{})
	healthy := start("compact/generic/healthy", contract.CompactBaseWorkflow, 2*time.Hour, contract.CompactBaseInput{})

	// Both broken runs have failed their workflow task often enough, and visibility lists all three.
	require.Eventually(t, func() bool {
		for _, r := range []client.WorkflowRun{byHand, timed} {
			d, err := c.DescribeWorkflowExecution(ctx, r.GetID(), r.GetRunID())
			if err != nil || d.GetPendingWorkflowTask().GetAttempt() < StuckWorkflowTaskAttempts {
				return false
			}
		}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `ExecutionStatus="Running"`})
		return err == nil && len(resp.GetExecutions()) == 3
	}, 2*time.Minute, 200*time.Millisecond)

	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	scans := make([]*stuckScan, 2)
	for i := range scans {
		scans[i] = &stuckScan{c: c, namespace: "default", interval: time.Minute, deadline: 10 * time.Minute,
			log: zaptest.NewLogger(t), metrics: NewMetrics(nil), now: ahead, pageSize: maxStuckDescribes}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(scans))
	for i, s := range scans {
		wg.Go(func() { errs[i] = s.scan(ctx) })
	}
	wg.Wait()
	terminated := 0.0
	for i, s := range scans {
		require.NoError(t, errs[i])
		terminated += testutil.ToFloat64(s.metrics.runsTerminated.WithLabelValues(contract.MergeWalWorkflow))
		got := testutil.ToFloat64(s.metrics.runsStuck.WithLabelValues(contract.MergeWalWorkflow, StuckWorkflowTask))
		require.Contains(t, []float64{1, 2}, got, "both broken runs, or the timed one after the other worker terminated the first")
		require.Zero(t, testutil.ToFloat64(s.metrics.runsStuck.WithLabelValues(contract.CompactBaseWorkflow, StuckPastDeadline)))
		require.Zero(t, testutil.ToFloat64(s.metrics.runsStuck.WithLabelValues(contract.CompactBaseWorkflow, StuckWorkflowTask)))
	}
	require.Equal(t, 1.0, terminated, "two workers terminate the hand-started run once")

	status := func(r client.WorkflowRun) enumspb.WorkflowExecutionStatus {
		d, err := c.DescribeWorkflowExecution(ctx, r.GetID(), r.GetRunID())
		require.NoError(t, err)
		return d.GetWorkflowExecutionInfo().GetStatus()
	}
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, status(byHand))
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status(timed), "Temporal times it out itself")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status(healthy))

	// A later scan sees only the timed run.
	require.NoError(t, scans[0].scan(ctx))
	require.Equal(t, 1.0, testutil.ToFloat64(scans[0].metrics.runsStuck.WithLabelValues(contract.MergeWalWorkflow, StuckWorkflowTask)))
}

// More running runs than a page: each scan reads one page of the same listing, the gauges
// count the whole listing once its last page is read, and the next scan lists afresh. The
// oldest runs, on the last page, are examined too.
func TestStuckScanWalksEveryPageOfTheListing(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	clock := now
	runs := []string{"new-healthy", "stuck-1", "stuck-2"} // newest first, as visibility lists them
	c := &mocks.Client{}
	var queries []string
	var tokens []string
	listFails := false
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			queries, tokens = append(queries, req.GetQuery()), append(tokens, string(req.GetNextPageToken()))
			if listFails {
				return nil, errors.New("visibility unavailable")
			}
			from := 0
			if len(req.GetNextPageToken()) > 0 {
				from = int(req.GetNextPageToken()[0])
			}
			to := min(from+int(req.GetPageSize()), len(runs))
			resp := &workflowservice.ListWorkflowExecutionsResponse{}
			for _, id := range runs[from:to] {
				resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{
					Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: id},
					Type:      &commonpb.WorkflowType{Name: contract.MergeWalWorkflow}})
			}
			if to < len(runs) {
				resp.NextPageToken = []byte{byte(to)}
			}
			return resp, nil
		}, nil)
	c.On("DescribeWorkflowExecution", mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			d := describedRun(now.Add(-10*time.Minute), time.Hour)
			d.WorkflowExecutionInfo.Status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			if id != "new-healthy" {
				d.PendingWorkflowTask = &workflowpb.PendingWorkflowTaskInfo{Attempt: 5}
			}
			return d, nil
		}, nil)
	c.On("WorkflowService").Return(noHistory{})

	s := &stuckScan{c: c, namespace: "default", interval: time.Minute, deadline: 2 * time.Hour,
		log: zaptest.NewLogger(t), metrics: NewMetrics(nil), now: func() time.Time { return clock }, pageSize: 2}
	gauge := func() float64 {
		return testutil.ToFloat64(s.metrics.runsStuck.WithLabelValues(contract.MergeWalWorkflow, StuckWorkflowTask))
	}
	require.NoError(t, s.scan(context.Background()))
	require.Zero(t, gauge(), "the listing is not read to its end yet")
	clock = clock.Add(time.Minute)
	require.NoError(t, s.scan(context.Background()))
	require.Equal(t, 2.0, gauge(), "both stuck runs, one on each page")
	clock = clock.Add(time.Minute)
	require.NoError(t, s.scan(context.Background()))
	require.Equal(t, queries[0], queries[1], "the pages of one listing share its query")
	require.NotEqual(t, queries[1], queries[2], "the next listing looks one minute later")

	// A page that fails starts the listing over; the gauges keep the last complete count.
	listFails = true
	require.Error(t, s.scan(context.Background()))
	listFails = false
	require.NoError(t, s.scan(context.Background()))
	require.Equal(t, []string{"", "\x02", "", "\x02", ""}, tokens)
	require.Equal(t, 2.0, gauge())
}

// noHistory is a workflow service whose history reads fail (the stuck detail stays short).
type noHistory struct {
	workflowservice.WorkflowServiceClient
}

func (noHistory) GetWorkflowExecutionHistoryReverse(context.Context, *workflowservice.GetWorkflowExecutionHistoryReverseRequest, ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryReverseResponse, error) {
	return nil, errors.New("no history in this test")
}
