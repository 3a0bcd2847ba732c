package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// TestTemporalAdmin runs the Temporal plumbing against a real dev server that starts without
// walkeeper's search attributes (like a vanilla cluster): registration and schedules must be
// idempotent, updates must reconcile, and pause/resume/trigger/describe must work.
func TestTemporalAdmin(t *testing.T) {
	_, c := testtemporal.StartWithOptions(t, testtemporal.Options{
		NoSearchAttributes: true,
		ExtraNamespaces:    []string{"conflict"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("search attributes", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			require.NoError(t, worker.EnsureSearchAttributes(ctx, c, "default"), "call %d", i+1)
		}
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
		require.NoError(t, err)
		for name, typ := range contract.SearchAttributes {
			assert.Equal(t, typ, resp.GetCustomAttributes()[name], name)
		}
	})

	t.Run("search attribute with the wrong type", func(t *testing.T) {
		_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        "conflict",
			SearchAttributes: map[string]enumspb.IndexedValueType{"WalPending": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		})
		require.NoError(t, err)
		err = worker.EnsureSearchAttributes(ctx, c, "conflict")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WalPending")
	})

	t.Run("sweep schedule", func(t *testing.T) {
		// An old deployment's schedule: a MaintenanceSweep per interval, overlap SKIP.
		_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:   worker.SweepScheduleID,
			Spec: client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Minute}}},
			Action: &client.ScheduleWorkflowAction{ID: "maintenance-sweep", Workflow: contract.MaintenanceSweepWorkflow,
				Args: []any{contract.MaintenanceSweepInput{}}, TaskQueue: contract.TaskQueue},
			Paused: true,
		})
		require.NoError(t, err)
		require.NoError(t, worker.ResumeSchedule(ctx, c, worker.SweepScheduleID, ""))

		// Ensuring it upgrades the action: one SweepWindow per window, a round every Every.
		require.NoError(t, worker.EnsureSweepScheduleOpts(ctx, c, worker.SweepSchedule{Every: time.Minute, Window: time.Hour}))
		d, err := worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
		require.NoError(t, err)
		assertInterval(t, d, time.Hour)
		a := d.Schedule.Action.(*client.ScheduleWorkflowAction)
		assert.Equal(t, contract.SweepWindowWorkflow, a.Workflow)
		assert.Equal(t, contract.TaskQueue, a.TaskQueue)
		assert.Equal(t, worker.SweepWorkflowID, a.ID)
		require.Len(t, a.Args, 1)
		var in contract.SweepWindowInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(a.Args[0].(*commonpb.Payload), &in))
		assert.Equal(t, time.Minute, in.Interval)
		assert.Equal(t, time.Hour, in.Window)
		assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, d.Schedule.Policy.Overlap)
		assert.Equal(t, time.Minute, d.Schedule.Policy.CatchupWindow)
		assert.False(t, d.Schedule.State.Paused)

		// No window ran, so the ensure started one at once (no worker polls here: it stays
		// running), instead of waiting for the next whole hour.
		var window string
		require.Eventually(t, func() bool {
			d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
			if err != nil || len(d.Info.RunningWorkflows) != 1 {
				return false
			}
			window = d.Info.RunningWorkflows[0].WorkflowID
			return true
		}, 30*time.Second, 200*time.Millisecond)
		assert.Contains(t, window, worker.SweepWorkflowID+"-")

		// A second ensure (another worker starting) starts no second window.
		require.NoError(t, worker.EnsureSweepScheduleOpts(ctx, c, worker.SweepSchedule{Every: time.Minute, Window: time.Hour}))
		time.Sleep(time.Second)
		d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
		require.NoError(t, err)
		assert.Len(t, d.Info.RunningWorkflows, 1)

		// Sweep now signals the running window.
		msg, err := worker.SweepNow(ctx, c)
		require.NoError(t, err)
		assert.Contains(t, msg, "signaled sweep window "+window)
		assert.True(t, historyHas(ctx, t, c, window, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))

		// Pausing the sweep pauses the schedule and cancels the window.
		require.NoError(t, worker.PauseSweep(ctx, c, "maintenance window"))
		d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
		require.NoError(t, err)
		assert.True(t, d.Schedule.State.Paused)
		assert.Equal(t, "maintenance window", d.Schedule.State.Note)
		assert.True(t, historyHas(ctx, t, c, window, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED))

		// Paused and no window running (no worker here to act on the cancel): sweep now runs
		// one MaintenanceSweep instead of starting an hour-long window.
		require.NoError(t, c.TerminateWorkflow(ctx, window, "", "test: the window ended"))
		require.Eventually(t, func() bool {
			d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
			return err == nil && len(d.Info.RunningWorkflows) == 0
		}, 30*time.Second, 200*time.Millisecond)
		msg, err = worker.SweepNow(ctx, c)
		require.NoError(t, err)
		assert.Contains(t, msg, "is paused: started one MaintenanceSweep "+worker.SweepWorkflowID+"-now-")
		resp, err := c.DescribeWorkflowExecution(ctx, msg[strings.LastIndex(msg, " ")+1:], "")
		require.NoError(t, err)
		assert.Equal(t, contract.MaintenanceSweepWorkflow, resp.GetWorkflowExecutionInfo().GetType().GetName())

		// The next ensure updates the interval and leaves the operator's pause alone.
		require.NoError(t, worker.EnsureSweepScheduleOpts(ctx, c, worker.SweepSchedule{Every: time.Minute, Window: 30 * time.Minute}))
		d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
		require.NoError(t, err)
		assertInterval(t, d, 30*time.Minute)
		assert.True(t, d.Schedule.State.Paused, "ensure must not unpause")

		require.NoError(t, worker.ResumeSweep(ctx, c, ""))
		d, err = worker.DescribeSchedule(ctx, c, worker.SweepScheduleID)
		require.NoError(t, err)
		assert.False(t, d.Schedule.State.Paused)

		assert.Error(t, worker.EnsureSweepSchedule(ctx, c, 0))
	})

	t.Run("target schedule", func(t *testing.T) {
		target := store.Target{Kind: store.KindGeneric, Name: "gs"}
		id := worker.TargetScheduleID(target)
		assert.Equal(t, "merge-wal-tick/generic/gs", id)
		require.NoError(t, worker.EnsureTargetSchedule(ctx, c, target, time.Hour))
		require.NoError(t, worker.EnsureTargetSchedule(ctx, c, target, 2*time.Hour))
		d, err := worker.DescribeSchedule(ctx, c, id)
		require.NoError(t, err)
		assertInterval(t, d, 2*time.Hour)
		a := d.Schedule.Action.(*client.ScheduleWorkflowAction)
		assert.Equal(t, contract.MergeWalTickWorkflow, a.Workflow)
		assert.Equal(t, id, a.ID)
		require.Len(t, a.Args, 1)
		p, ok := a.Args[0].(*commonpb.Payload)
		require.True(t, ok, "arg is %T", a.Args[0])
		var in map[string]any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &in))
		assert.Equal(t, map[string]any{"target": "generic:gs"}, in)

		require.NoError(t, worker.PauseSchedule(ctx, c, id, ""))
		require.NoError(t, worker.ResumeSchedule(ctx, c, id, ""))
		require.NoError(t, worker.DeleteSchedule(ctx, c, id))
		_, err = worker.DescribeSchedule(ctx, c, id)
		assert.Error(t, err)
	})
}

// historyHas says whether workflow id's history has an event of type typ.
func historyHas(ctx context.Context, t *testing.T, c client.Client, id string, typ enumspb.EventType) bool {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if e.GetEventType() == typ {
			return true
		}
	}
	return false
}

func assertInterval(t *testing.T, d *client.ScheduleDescription, every time.Duration) {
	t.Helper()
	require.NotNil(t, d.Schedule.Spec)
	require.Len(t, d.Schedule.Spec.Intervals, 1)
	assert.Equal(t, every, d.Schedule.Spec.Intervals[0].Every)
}

func TestTemporalConfigTLS(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL", "")
	// Plain by default.
	o, err := worker.TemporalConfig{}.ClientOptions(nil)
	require.NoError(t, err)
	assert.Nil(t, o.ConnectionOptions.TLS)
	assert.Equal(t, worker.DefaultTemporalHostPort, o.HostPort)
	assert.Equal(t, worker.DefaultTemporalNamespace, o.Namespace)

	// An API key implies TLS and sets credentials.
	o, err = worker.TemporalConfig{HostPort: "ns.acct.tmprl.cloud:7233", APIKey: "k"}.ClientOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, o.ConnectionOptions.TLS)
	assert.NotNil(t, o.Credentials)

	// Cert without key is refused; missing files are reported.
	_, err = worker.TemporalConfig{TLSCert: "a.pem"}.ClientOptions(nil)
	assert.Error(t, err)
	_, err = worker.TemporalConfig{TLSCA: filepath.Join(t.TempDir(), "missing.pem")}.ClientOptions(nil)
	assert.Error(t, err)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o644))
	_, err = worker.TemporalConfig{TLSCA: bad, TLSServerName: "x"}.ClientOptions(nil)
	assert.Error(t, err)
}

func TestTemporalConfigFromEnv(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL", "temporal:7233")
	t.Setenv("WALKEEPER_NAMESPACE", "prod")
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "true")
	t.Setenv("WALKEEPER_TEMPORAL_TLS_SERVER_NAME", "temporal.internal")
	c, err := worker.TemporalConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, "temporal:7233", c.HostPort)
	assert.Equal(t, "prod", c.Namespace)
	assert.True(t, c.TLS)
	assert.Equal(t, "temporal.internal", c.TLSServerName)
}

// A Temporal boolean in the environment parses like every other knob: a bad value is an
// error naming the variable, never a silent false (it used to be).
func TestTemporalConfigBadEnvIsAnError(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "maybe")
	_, err := worker.TemporalConfigFromEnv()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `WALKEEPER_TEMPORAL_TLS="maybe"`)

	var c worker.TemporalConfig
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(nil))
	err = c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WALKEEPER_TEMPORAL_TLS")

	// The flag given on the command line supersedes the bad environment value.
	c = worker.TemporalConfig{}
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--temporal-tls"}))
	require.NoError(t, c.Validate())
	assert.True(t, c.TLS)

	// Help texts and environment names come from the knob table.
	for _, k := range worker.Knobs() {
		if f := fs.Lookup(k.Flag); f != nil {
			assert.Equal(t, k.Usage+" (env "+k.Env+")", f.Usage, k.Flag)
		}
	}
	assert.NotNil(t, fs.Lookup("temporal-api-key"))
}
