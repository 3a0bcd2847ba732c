// Package fleet runs the maintenance sweep against a fleet well past the size at which the
// stats-scanning sweep stopped working (~16,000 stores of one kind, where its one result per kind outgrew Temporal's payload limit), on mem://
// storage and a real Temporal dev server (internal/testkit/testtemporal), with the real workflows
// and activities in-process.
//
// `go test -short` skips it.
package fleet

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/requestcount"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/workflows"
)

// fleetStores is the number of generic stores registered: three times the old limit.
const fleetStores = 50_000

var schema = store.Schema{Fields: []store.Field{
	{Name: "id", Type: "string"},
	{Name: "n", Type: "int64", Nullable: true},
}}

func storeName(i int) string { return fmt.Sprintf("s-%05d", i) }

// TestSweepDrainsDebtInAFleetOf50kStores plants debt that only the sweep can find (no
// count trigger, no schedule: nothing but the sweep starts merges) in a few of 50,000
// stores of one kind:
//
//   - two stores over merge_min_generations in one shard each, one over it only across two
//     shards (the fleet trigger on total pending);
//   - one store with a single generation sealed an hour ago by a writer that died right
//     after sealing (the time trigger on small, old debt);
//   - one store with two fresh generations, below every threshold, which must be left alone.
//
// One sweep must start exactly the four merges, they must drain everything they cover, the
// demand index must then hold only the store below threshold, and a second sweep must
// start nothing and cost a constant number of storage requests.
func TestSweepDrainsDebtInAFleetOf50kStores(t *testing.T) {
	testtemporal.SkipShort(t)
	began := time.Now()
	// A guard against a hang, not a bound: registering the fleet alone is CPU-bound and took
	// 84 s under -race beside the other packages, and over 4 minutes when three race-built
	// packages shared the 2 cores with it.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	url := fmt.Sprintf("mem://fleet-%d", time.Now().UnixNano())

	// Register the fleet through DB.Create (two conditional puts per store).
	setup := openDB(t, url, "setup", nil)
	var g errgroup.Group
	g.SetLimit(max(runtime.GOMAXPROCS(0), 2))
	for i := range fleetStores {
		g.Go(func() error {
			_, err := setup.Create(ctx, store.Target{Kind: store.KindGeneric, Name: storeName(i)}, store.CreateOptions{Schema: &schema})
			return err
		})
	}
	require.NoError(t, g.Wait())
	t.Logf("registered %d stores in %s", fleetStores, time.Since(began).Round(time.Millisecond))

	// Plant the debt with writer processes of their own (their own shards).
	writerA := openDB(t, url, "writer-a", nil)
	writerB := openDB(t, url, "writer-b", nil)
	hourAgo := func() time.Time { return time.Now().Add(-time.Hour) }
	dead := openDB(t, url, "writer-dead", hourAgo)
	hot1, hot2, split, old, young := storeName(17), storeName(25_000), storeName(33_333), storeName(40_404), storeName(49_999)
	seal(t, writerA, hot1, 9)
	seal(t, writerB, hot2, 12)
	seal(t, writerA, split, 4)
	seal(t, writerB, split, 4)
	seal(t, dead, old, 1) // and the writer is never heard of again
	seal(t, writerA, young, 2)
	t.Logf("planted debt at %s", time.Since(began).Round(time.Millisecond))

	// One worker process runs the workflows and activities on the shared queue and serves
	// the writers' shard queues (a dead writer's queue would otherwise fall back to the
	// shared queue after 30 s per activity; the activities run are the same).
	counter := &requestcount.Counter{}
	base, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	opts := store.DefaultOptions()
	opts.InstanceID = "sweeper"
	db := store.OpenDBOnBucket(base.WithFaults(counter), opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	_, tc := testtemporal.Start(t)
	acts := &activities.Activities{DB: db, Client: tc}
	queues := []string{contract.TaskQueue}
	for _, w := range []*store.DB{writerA, writerB, dead} {
		queues = append(queues, contract.ShardQueue(w.Shard()))
	}
	startWorkers(t, tc, acts, queues...)

	// Sweep 1: finds and starts exactly the stores over a threshold.
	t.Logf("server and workers up at %s", time.Since(began).Round(time.Millisecond))
	res := sweep(ctx, t, tc, "sweep-1")
	t.Logf("sweep 1 done at %s", time.Since(began).Round(time.Millisecond))
	require.Empty(t, res.ScanErrors)
	require.Equal(t, 5, res.StoresWithDebt)
	require.Equal(t, 4, res.Qualified)
	started := map[string]contract.SweepStart{}
	for _, s := range res.Started {
		require.Equal(t, contract.MergeWalWorkflow, s.Workflow)
		started[s.Target] = s
	}
	require.Len(t, started, 4, "started: %+v", res.Started)
	for _, n := range []string{hot1, hot2, split, old} {
		require.Contains(t, started, "generic:"+n)
	}
	require.Contains(t, started["generic:"+old].Reason, "oldest pending", "the dead writer's store is found by the time trigger")
	require.Contains(t, started["generic:"+split].Reason, "8 pending >= 8")
	require.NotContains(t, started, "generic:"+young, "below every threshold: counted as debt, not a candidate")

	// Every started merge completes and drains its store.
	for _, s := range res.Started {
		var mr contract.MergeWalResult
		require.NoError(t, tc.GetWorkflow(ctx, s.WorkflowID, s.RunID).Get(ctx, &mr), s.Target)
	}
	t.Logf("merges done at %s", time.Since(began).Round(time.Millisecond))
	for _, n := range []string{hot1, hot2, split, old} {
		st, err := openStats(ctx, db, n)
		require.NoError(t, err)
		for _, sh := range st.Shards {
			require.Zero(t, sh.PendingGenerations, "%s shard %s still in debt", n, sh.Shard)
		}
	}
	var left []string
	require.NoError(t, db.WalkDemand(ctx, store.KindGeneric, func(r store.DemandRecord) error {
		left = append(left, r.Target.Name)
		return nil
	}))
	require.Equal(t, []string{young, young}, left, "only the store below threshold keeps its demand records")

	// Sweep 2: nothing over threshold; its discovery is list-only and constant in the fleet.
	before := counter.Counts()
	res = sweep(ctx, t, tc, "sweep-2")
	used := counter.Counts().Sub(before)
	require.Empty(t, res.ScanErrors)
	require.Empty(t, res.Started)
	require.Equal(t, 1, res.StoresWithDebt)
	require.Zero(t, used.Get, "the sweep never reads a store: %+v", used)
	require.LessOrEqual(t, used.Total(), int64(2*res.StoresWithDebt+len(store.Kinds)), "requests: %+v", used)
	t.Logf("fleet of %d: sweep 2 made %d storage requests (%+v); whole test %s",
		fleetStores, used.Total(), used, time.Since(began).Round(time.Millisecond))
}

func openDB(t *testing.T, url, instance string, now func() time.Time) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.InstanceID = instance
	opts.Now = now
	db, err := store.OpenDB(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// seal writes gens generations of one row each into store name through db's writer.
func seal(t *testing.T, db *store.DB, name string, gens int) {
	t.Helper()
	ctx := context.Background()
	s, err := db.Open(ctx, store.Target{Kind: store.KindGeneric, Name: name})
	require.NoError(t, err)
	for i := range gens {
		key := fmt.Sprintf("%s-%s-%d", db.Shard()[:8], name, i)
		_, err := s.Append(ctx, []store.Row{{Key: key, Values: []any{key, int64(i)}}})
		require.NoError(t, err)
		res, err := s.Flush(ctx)
		require.NoError(t, err)
		require.True(t, res.Sealed)
	}
}

func sweep(ctx context.Context, t *testing.T, tc client.Client, id string) contract.MaintenanceSweepResult {
	t.Helper()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: contract.TaskQueue},
		contract.MaintenanceSweepWorkflow, contract.MaintenanceSweepInput{})
	require.NoError(t, err)
	var res contract.MaintenanceSweepResult
	require.NoError(t, run.Get(ctx, &res), "the sweep failed")
	return res
}

func openStats(ctx context.Context, db *store.DB, name string) (store.Stats, error) {
	s, err := db.Open(ctx, store.Target{Kind: store.KindGeneric, Name: name})
	if err != nil {
		return store.Stats{}, err
	}
	return s.Stats(ctx)
}

// startWorkers runs one Temporal worker per queue with acts registered, stopped when the test
// ends; the first queue's worker also runs the workflows (the others are shard queues).
func startWorkers(t *testing.T, tc client.Client, acts *activities.Activities, queues ...string) {
	t.Helper()
	for i, q := range queues {
		w := tworker.New(tc, q, tworker.Options{DisableWorkflowWorker: i > 0})
		if i == 0 {
			workflows.Register(w)
		}
		activities.Register(w, acts)
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}
}
