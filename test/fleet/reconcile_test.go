package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// recordEnv makes TestReconcileRepairsWhatTheIndexMissed write the histories it produces
// into workflows/testdata/replay (maintenance-sweep-demand.json, reconcile-demand.json).
const recordEnv = "WALKEEPER_RECORD_HISTORIES"

// Stores whose generations have no demand record (sealed before the index existed, or the
// record was lost) are invisible to the sweep until ReconcileDemand pages through the
// registry and writes the missing records; it continues as new every PagesPerRun pages and
// records its success. The sweep then finds and drains them.
func TestReconcileRepairsWhatTheIndexMissed(t *testing.T) {
	testtemporal.SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := fmt.Sprintf("mem://reconcile-%d", time.Now().UnixNano())
	writer := openDB(t, url, "writer", nil)
	const n = 25
	for i := range n {
		_, err := writer.Create(ctx, store.Target{Kind: store.KindGeneric, Name: storeName(i)}, store.CreateOptions{Schema: &schema})
		require.NoError(t, err)
	}
	lost := []string{storeName(3), storeName(11), storeName(24)}
	for _, name := range lost {
		seal(t, writer, name, 8)
	}
	// Lose every demand record: what a store sealed before the index looks like.
	var keys []string
	require.NoError(t, writer.WalkDemand(ctx, store.KindGeneric, func(r store.DemandRecord) error {
		keys = append(keys, r.Key)
		return nil
	}))
	require.Len(t, keys, 8*len(lost))
	for _, k := range keys {
		require.NoError(t, writer.Bucket().Delete(ctx, k))
	}

	db := openDB(t, url, "worker", nil)
	_, tc := testtemporal.Start(t)
	acts := &activities.Activities{DB: db, Client: tc}
	startWorkers(t, tc, acts, contract.TaskQueue, contract.ShardQueue(writer.Shard()))

	// The worker's schedule for it: ReconcileDemand, overlap SKIP, jittered. Retried as a
	// starting worker retries it: a dev server beside the run's other lanes answers late.
	ensure := func(ctx context.Context) error { return temporaladmin.EnsureReconcileSchedule(ctx, tc, time.Hour) }
	require.NoError(t, temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, nil, ensure))
	require.NoError(t, temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, nil, ensure), "idempotent")
	d, err := temporaladmin.DescribeSchedule(ctx, tc, temporaladmin.ReconcileScheduleID)
	require.NoError(t, err)
	act, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok)
	require.Equal(t, contract.ReconcileDemandWorkflow, act.Workflow)
	require.Equal(t, 6*time.Minute, d.Schedule.Spec.Jitter)
	require.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, d.Schedule.Policy.Overlap)

	blind := sweep(ctx, t, tc, "sweep-blind")
	require.Empty(t, blind.Started, "without records the sweep cannot see the debt")

	rrun, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "reconcile-1", TaskQueue: contract.TaskQueue},
		contract.ReconcileDemandWorkflow, contract.ReconcileDemandInput{PageSize: 10, PagesPerRun: 2})
	require.NoError(t, err)
	var rres contract.ReconcileDemandResult
	require.NoError(t, rrun.Get(ctx, &rres))
	require.Equal(t, n, rres.Totals.Stores)
	require.Equal(t, 8*len(lost), rres.Totals.Missing)
	require.Zero(t, rres.Totals.Unreadable)
	// generic: 3 pages of 10; rollout and datagen: one empty page each.
	require.Equal(t, 5, rres.Totals.Pages)
	require.Equal(t, 3, rres.Runs, "continued as new every 2 pages")

	found := sweep(ctx, t, tc, "sweep-demand")
	require.Len(t, found.Started, len(lost))
	for _, s := range found.Started {
		require.NoError(t, tc.GetWorkflow(ctx, s.WorkflowID, s.RunID).Get(ctx, nil))
	}
	for _, name := range lost {
		st, err := openStats(ctx, db, name)
		require.NoError(t, err)
		for _, sh := range st.Shards {
			require.Zero(t, sh.PendingGenerations, name)
		}
	}

	sweepEvents := historyLen(ctx, t, tc, "sweep-demand", "")
	require.Less(t, sweepEvents, 200, "a sweep's history is bounded by its starts")
	if os.Getenv(recordEnv) != "" {
		_, file, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(file), "..", "..", "workflows", "testdata", "replay")
		saveHistory(ctx, t, tc, filepath.Join(dir, "maintenance-sweep-demand.json"), "sweep-demand", "")
		// The last run of the reconcile chain (the one that finished).
		saveHistory(ctx, t, tc, filepath.Join(dir, "reconcile-demand.json"), "reconcile-1", "")
	}
}

func historyLen(ctx context.Context, t *testing.T, tc client.Client, id, runID string) int {
	t.Helper()
	return len(history(ctx, t, tc, id, runID).Events)
}

func history(ctx context.Context, t *testing.T, tc client.Client, id, runID string) *historypb.History {
	t.Helper()
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

// saveHistory writes one run's history in the JSON of `temporal workflow show --output json`.
func saveHistory(ctx context.Context, t *testing.T, tc client.Client, path, id, runID string) {
	t.Helper()
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(history(ctx, t, tc, id, runID))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(raw, '\n'), 0o644))
	t.Logf("recorded %s", path)
}
