package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/requestcount"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

type maintenanceRecorder struct {
	Metrics
	got []string
}

func (m *maintenanceRecorder) ActivityDone(string, store.Kind, string, time.Duration) {}
func (m *maintenanceRecorder) MaintenanceSucceeded(workflow string, _ time.Time) {
	m.got = append(m.got, workflow)
}

// ScanDemand returns at most MaxCandidates stores over a threshold, most indebted first,
// counting every store with records, and reads no store.
func TestScanDemandKeepsTheMostIndebtedCandidates(t *testing.T) {
	url := memURL(t)
	db := openDB(t, url, "w1")
	old := openDB(t, url, "w-old")
	seal(t, db, "generic:five", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"}, []string{"e"})
	seal(t, db, "generic:four", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"})
	seal(t, db, "generic:three", []string{"a"}, []string{"b"}, []string{"c"})
	seal(t, db, "generic:one", []string{"a"})
	seal(t, old, "generic:aged", []string{"a"})

	// The aged store's record says it was sealed two hours before "now".
	counter := &requestcount.Counter{}
	b, err := objstore.OpenBucket(context.Background(), url)
	require.NoError(t, err)
	scanDB := store.OpenDBOnBucket(b.WithFaults(counter), store.DefaultOptions())
	env := newActivityEnv(t, &Activities{DB: scanDB})
	now := time.Now().Add(2 * time.Hour)
	res := mustRun[contract.ScanDemandResult](t, env, contract.ScanDemandActivity, contract.ScanDemandParams{
		Kind: "generic", MaxCandidates: 2, MergeMinGenerations: 3, MaxPendingAge: 3 * time.Hour, AsOf: now,
	})
	require.Equal(t, 5, res.StoresWithDebt)
	require.Equal(t, 14, res.Records)
	require.Equal(t, 3, res.Qualified, "five, four, three over 3 pending; nothing old enough")
	require.Len(t, res.Targets, 2)
	require.Equal(t, "generic:five", res.Targets[0].Target)
	require.Equal(t, 5, res.Targets[0].Pending)
	require.Equal(t, 1, res.Targets[0].PendingShards)
	require.Equal(t, "generic:four", res.Targets[1].Target)
	c := counter.Counts()
	require.Zero(t, c.Get, "list-only")
	require.EqualValues(t, 1, c.List)

	// With a shorter age every store with debt qualifies, aged and one included.
	res = mustRun[contract.ScanDemandResult](t, env, contract.ScanDemandActivity, contract.ScanDemandParams{
		Kind: "generic", MaxCandidates: 10, MergeMinGenerations: 3, MaxPendingAge: time.Hour, AsOf: now,
	})
	require.Equal(t, 5, res.Qualified)
	require.Len(t, res.Targets, 5)

	_, err = env.ExecuteActivity(contract.ScanDemandActivity, contract.ScanDemandParams{Kind: "nope"})
	require.Error(t, err)
}

// Pages of two candidates, each after the last target of the one before, as of one
// moment, return every qualified store once, most indebted first, and then nothing.
func TestScanDemandPagesInDebtOrder(t *testing.T) {
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:five", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"}, []string{"e"})
	seal(t, db, "generic:four", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"})
	seal(t, db, "generic:three", []string{"a"}, []string{"b"}, []string{"c"})
	seal(t, db, "generic:two", []string{"a"}, []string{"b"})
	seal(t, db, "generic:one", []string{"a"})
	env := newActivityEnv(t, &Activities{DB: openDB(t, url, "scan")})
	asOf := time.Now().Add(time.Hour)
	var got []string
	var qualified []int
	var after *contract.DemandTarget
	for page := 0; page < 4; page++ {
		res := mustRun[contract.ScanDemandResult](t, env, contract.ScanDemandActivity, contract.ScanDemandParams{
			Kind: "generic", MaxCandidates: 2, MergeMinGenerations: 2, After: after, AsOf: asOf,
		})
		require.Equal(t, 5, res.StoresWithDebt, "every page lists the whole index")
		qualified = append(qualified, res.Qualified)
		got = append(got, demandTargets(res)...)
		if len(res.Targets) == 0 {
			break
		}
		after = &res.Targets[len(res.Targets)-1]
	}
	require.Equal(t, []string{"generic:five", "generic:four", "generic:three", "generic:two"}, got)
	require.Equal(t, []int{4, 2, 0}, qualified, "qualified counts what is left after the cursor")
}

func TestRecordMaintenance(t *testing.T) {
	m := &maintenanceRecorder{}
	env := newActivityEnv(t, &Activities{Metrics: m})
	_, err := env.ExecuteActivity(contract.RecordMaintenanceActivity, contract.RecordMaintenanceParams{Workflow: contract.MaintenanceSweepName})
	require.NoError(t, err)
	require.Equal(t, []string{contract.MaintenanceSweepName}, m.got)
	_, err = env.ExecuteActivity(contract.RecordMaintenanceActivity, contract.RecordMaintenanceParams{Workflow: "other"})
	require.ErrorContains(t, err, "unknown maintenance workflow")
}

func TestGuardPayloadRefusesOversizedResults(t *testing.T) {
	big := contract.ScanDemandResult{}
	for range 2000 {
		big.Targets = append(big.Targets, contract.DemandTarget{Target: "generic:" + string(make([]byte, 120))})
	}
	err := guardPayload(contract.ScanDemandActivity, big)
	require.ErrorContains(t, err, "payload limit")
	require.Equal(t, contract.ErrTypePayloadTooLarge, ErrorType(err))
	require.NoError(t, guardPayload(contract.ScanDemandActivity, contract.ScanDemandResult{}))
}

// ReconcilePage walks a registry that holds objects walkeeper did not write: they are not
// stores, a page of them neither fails the walk nor becomes its cursor, and every store is
// reconciled once.
func TestReconcilePagesPastForeignRegistryKeys(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	db := openDB(t, url, "w1")
	for _, name := range []string{"a", "m", "z"} {
		seal(t, db, "generic:"+name, []string{"k"})
	}
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	defer b.Close()
	for _, k := range []string{".DS_Store", "README.txt", "a/b", "m.json.bak", "n-1.txt", "n-2.txt", "n-3.txt"} {
		require.NoError(t, b.Put(ctx, "_registry/generic/"+k, []byte("x")))
	}
	env := newActivityEnv(t, &Activities{DB: db})
	var stores int
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 4, "the walk ends")
		res := mustRun[contract.ReconcilePageResult](t, env, contract.ReconcilePageActivity, contract.ReconcilePageParams{Kind: "generic", After: after, Limit: 1})
		require.Zero(t, res.Counts.Unreadable, "%+v", res.Problems)
		stores += res.Counts.Stores
		if res.Next == "" {
			break
		}
		after = res.Next
	}
	require.Equal(t, 3, stores)
}

// A store whose MergeWal visibility lists as running is counted, not listed: the sweep's
// start would only attach to it. The next most indebted store takes its place on the page,
// and a failed listing filters nothing.
func TestScanDemandLeavesOutStoresWhoseMergeIsRunning(t *testing.T) {
	url := memURL(t)
	db := openDB(t, url, "w1")
	seal(t, db, "generic:five", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"}, []string{"e"})
	seal(t, db, "generic:four", []string{"a"}, []string{"b"}, []string{"c"}, []string{"d"})
	seal(t, db, "generic:three", []string{"a"}, []string{"b"}, []string{"c"})

	var queries []string
	c := &mocks.Client{}
	c.On("ListWorkflow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			queries = append(queries, req.GetQuery())
			if len(req.GetNextPageToken()) == 0 { // two pages: the running store is on the second
				return &workflowservice.ListWorkflowExecutionsResponse{NextPageToken: []byte("p2"), Executions: []*workflowpb.WorkflowExecutionInfo{
					{Execution: &commonpb.WorkflowExecution{WorkflowId: "merge-wal/generic/elsewhere"}}}}, nil
			}
			return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{
				{Execution: &commonpb.WorkflowExecution{WorkflowId: "merge-wal/generic/five"}}}}, nil
		})
	scan := func(a *Activities) contract.ScanDemandResult {
		return mustRun[contract.ScanDemandResult](t, newActivityEnv(t, a), contract.ScanDemandActivity,
			contract.ScanDemandParams{Kind: "generic", MaxCandidates: 2, MergeMinGenerations: 3})
	}

	res := scan(&Activities{DB: db, Client: c})
	require.Equal(t, []string{"generic:four", "generic:three"}, demandTargets(res))
	require.Equal(t, 1, res.Running)
	require.Equal(t, 3, res.Qualified)
	require.Len(t, queries, 2, "one listing per scan, both pages")
	require.Equal(t, "WorkflowType = 'MergeWal' AND ExecutionStatus = 'Running' AND WalKind = 'generic'", queries[0])

	failing := &mocks.Client{}
	failing.On("ListWorkflow", mock.Anything, mock.Anything).Return(nil, errors.New("visibility unavailable"))
	res = scan(&Activities{DB: db, Client: failing})
	require.Equal(t, []string{"generic:five", "generic:four"}, demandTargets(res))
	require.Zero(t, res.Running)
}

// demandTargets is res's candidates' targets, in order.
func demandTargets(res contract.ScanDemandResult) []string {
	var out []string
	for _, t := range res.Targets {
		out = append(out, t.Target)
	}
	return out
}
