package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/walkeeper/walkeeper/contract"
)

func describedRun(started time.Time, runTimeout time.Duration) *workflowservice.DescribeWorkflowExecutionResponse {
	d := &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{StartTime: timestamppb.New(started)},
		ExecutionConfig:       &workflowpb.WorkflowExecutionConfig{},
	}
	if runTimeout > 0 {
		d.ExecutionConfig.WorkflowRunTimeout = durationpb.New(runTimeout)
	}
	return d
}

func TestClassifyRun(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	deadline := 2 * time.Hour

	// A young run with a healthy task and a first retry is not stuck.
	d := describedRun(now.Add(-time.Minute), deadline)
	d.PendingWorkflowTask = &workflowpb.PendingWorkflowTaskInfo{Attempt: StuckWorkflowTaskAttempts - 1}
	d.PendingActivities = []*workflowpb.PendingActivityInfo{{Attempt: StuckActivityAttempts - 1}}
	s := classifyRun(d, now, deadline)
	require.Equal(t, "", s.Reason)
	require.False(t, s.Terminable())

	// A workflow task failing over and over wins over everything else.
	d.PendingWorkflowTask.Attempt = 7
	d.PendingActivities[0].Attempt = 4
	s = classifyRun(d, now, deadline)
	require.Equal(t, StuckWorkflowTask, s.Reason)
	require.Equal(t, "workflow task failing (attempt 7)", s.Detail)

	// An activity retrying beyond the routine first retry, with its last failure.
	d.PendingWorkflowTask = nil
	d.PendingActivities[0].ActivityType = &commonpb.ActivityType{Name: contract.PrepareActivity}
	d.PendingActivities[0].LastFailure = &failurepb.Failure{Message: "bucket unreachable"}
	s = classifyRun(d, now, deadline)
	require.Equal(t, StuckActivity, s.Reason)
	require.Equal(t, "activity Prepare retrying (attempt 4: bucket unreachable)", s.Detail)

	// Past its own run timeout: Temporal ends it, so the scan must not terminate it.
	d = describedRun(now.Add(-3*time.Hour), deadline)
	s = classifyRun(d, now, time.Hour)
	require.Equal(t, StuckPastDeadline, s.Reason)
	require.True(t, s.OwnTimeout)
	require.Equal(t, deadline, s.Deadline, "the run's own timeout is its deadline")
	require.False(t, s.Terminable())

	// Started by hand without a run timeout: the caller's deadline applies and only a
	// terminate ends it; its reason stays the most telling one.
	d = describedRun(now.Add(-3*time.Hour), 0)
	d.PendingWorkflowTask = &workflowpb.PendingWorkflowTaskInfo{Attempt: 40}
	s = classifyRun(d, now, deadline)
	require.Equal(t, StuckWorkflowTask, s.Reason)
	require.True(t, s.PastDeadline)
	require.True(t, s.Terminable())
	require.Equal(t, 3*time.Hour, s.Age)

	// Younger than the deadline, without a run timeout: nothing to do yet.
	d = describedRun(now.Add(-time.Hour), 0)
	s = classifyRun(d, now, deadline)
	require.Equal(t, "", s.Reason)
	require.False(t, s.Terminable())
}
