package workflows

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/walkeeper/walkeeper/contract"
)

// stub is an activity the workflow tests register under a real activity name and mock with
// OnActivity(name, mock.Anything, mock.Anything).Return(func...). It never runs: a mocked
// activity's return function replaces it.
func stub[P, R any](context.Context, P) (R, error) {
	var r R
	return r, errors.New("not mocked")
}

// stubRecordMaintenance succeeds: recording a success has no outcome a test mocks.
func stubRecordMaintenance(context.Context, contract.RecordMaintenanceParams) error { return nil }

// newEnv is a test environment with every walkeeper workflow and a stub of every activity.
func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	return newEnvWithMetrics(t, nil)
}

// newEnvWithMetrics is newEnv whose workflows' metrics go to h (nil: nowhere).
func newEnvWithMetrics(t *testing.T, h client.MetricsHandler) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	if h != nil {
		s.SetMetricsHandler(h)
	}
	return newSuiteEnv(&s)
}

// newSuiteEnv is newEnv of the suite s, which may set a logger or a metrics handler.
func newSuiteEnv(s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	// The machine running the tests may be loaded; the 1s default deadlock detector then
	// fires on perfectly yielding workflow code.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	Register(env)
	for name, fn := range map[string]any{
		contract.ListPendingShardsActivity: stub[contract.ListPendingShardsParams, contract.ListPendingShardsResult],
		contract.PrepareActivity:           stub[contract.PrepareParams, contract.PrepareResult],
		contract.CommitRoundActivity:       stub[contract.CommitRoundParams, contract.CommitRoundResult],
		contract.AbortActivity:             stub[contract.AbortParams, contract.AbortResult],
		contract.CompactBaseActivity:       stub[contract.CompactPassParams, contract.CompactPassResult],
		contract.StartWorkflowsActivity:    stub[contract.StartWorkflowsParams, contract.StartWorkflowsResult],
		contract.ScanDemandActivity:        stub[contract.ScanDemandParams, contract.ScanDemandResult],
		contract.ReconcilePageActivity:     stub[contract.ReconcilePageParams, contract.ReconcilePageResult],
		contract.RecordMaintenanceActivity: stubRecordMaintenance,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

// call records one mocked activity execution.
type call struct {
	shard      string
	queue      string
	activityID string
	through    uint64
}

// fakeTable models one target's shards for the mocked Prepare/CommitRound/Abort: each shard has
// generations 1..n pending; a pass takes up to perPass of them.
type fakeTable struct {
	target  string
	perPass int

	mu        sync.Mutex
	pending   map[string]int    // generations sealed per shard
	watermark map[string]uint64 // merged through
	version   uint64
	prepares  []call
	commits   []call
	aborts    []call
	// rounds lists the shards of each CommitRound, in call order.
	rounds [][]string
	// staleOnce: the next round that includes the shard reports it stale.
	staleOnce map[string]bool
}

// shardsEach is n shards named by format from their index, each with gens pending generations.
func shardsEach(format string, n, gens int) map[string]int {
	pending := make(map[string]int, n)
	for i := range n {
		pending[fmt.Sprintf(format, i)] = gens
	}
	return pending
}

func newFakeTable(target string, perPass int, pending map[string]int) *fakeTable {
	return &fakeTable{target: target, perPass: perPass, pending: pending, watermark: map[string]uint64{}}
}

func (f *fakeTable) list(context.Context, contract.ListPendingShardsParams) (contract.ListPendingShardsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res contract.ListPendingShardsResult
	for shard, n := range f.pending {
		if left := n - int(f.watermark[shard]); left > 0 {
			res.Shards = append(res.Shards, contract.ShardPending{Shard: shard, Pending: left})
		}
	}
	// The workflow must not rely on the listing order: hand it out reversed.
	sort.Slice(res.Shards, func(i, j int) bool { return res.Shards[i].Shard > res.Shards[j].Shard })
	return res, nil
}

func (f *fakeTable) prepare(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := activity.GetInfo(ctx)
	f.prepares = append(f.prepares, call{shard: p.Shard, queue: info.TaskQueue, activityID: info.ActivityID})
	wm := f.watermark[p.Shard]
	n := uint64(f.pending[p.Shard])
	if wm >= n {
		return contract.PrepareResult{}, nil
	}
	var gens []uint64
	for g := wm + 1; g <= n && len(gens) < f.perPass; g++ {
		gens = append(gens, g)
	}
	return contract.PrepareResult{Prepared: &contract.PreparedMerge{
		Target:      p.Target,
		Shard:       p.Shard,
		Generations: gens,
		Through:     gens[len(gens)-1],
		AttemptKey:  info.WorkflowExecution.ID + "/" + info.ActivityID,
		Staged:      []contract.StagedFile{{Path: "staged/" + info.ActivityID}},
	}}, nil
}

// commitRound models CommitRound: one base version for every shard of the round that is
// still open, already committed for covered ones, stale for those in staleOnce.
func (f *fakeTable) commitRound(ctx context.Context, p contract.CommitRoundParams) (contract.CommitRoundResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := activity.GetInfo(ctx)
	var res contract.CommitRoundResult
	var shards []string
	published := false
	for _, pm := range p.Prepared {
		shards = append(shards, pm.Shard)
		f.commits = append(f.commits, call{shard: pm.Shard, queue: info.TaskQueue, activityID: info.ActivityID, through: pm.Through})
		sr := contract.RoundShardResult{Shard: pm.Shard}
		switch {
		case f.staleOnce[pm.Shard]:
			delete(f.staleOnce, pm.Shard)
			sr.Outcome, sr.Reason = contract.RoundStale, "watermark moved"
		case f.watermark[pm.Shard] >= pm.Through:
			sr.Outcome, sr.BaseVersion = contract.RoundAlreadyCommitted, f.version
		default:
			if !published {
				f.version++
				published = true
				res.BaseVersion = f.version
			}
			f.watermark[pm.Shard] = pm.Through
			sr.Outcome, sr.BaseVersion, sr.Reclaimed = contract.RoundCommitted, f.version, len(pm.Generations)
		}
		res.Shards = append(res.Shards, sr)
	}
	f.rounds = append(f.rounds, shards)
	return res, nil
}

func (f *fakeTable) abort(ctx context.Context, p contract.AbortParams) (contract.AbortResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info := activity.GetInfo(ctx)
	f.aborts = append(f.aborts, call{shard: p.Prepared.Shard, queue: info.TaskQueue, activityID: info.ActivityID, through: p.Prepared.Through})
	return contract.AbortResult{Deleted: len(p.Prepared.Staged)}, nil
}

func (f *fakeTable) calls(which *[]call) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), *which...)
}

// mockTable wires f into env. Extra mocks registered earlier win over these (testify
// matches expectations in registration order).
func mockTable(env *testsuite.TestWorkflowEnvironment, f *fakeTable) {
	env.OnActivity(contract.ListPendingShardsActivity, anyCtx, anyArg).Return(f.list).Maybe()
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).Return(f.prepare).Maybe()
	env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).Return(f.commitRound).Maybe()
	env.OnActivity(contract.AbortActivity, anyCtx, anyArg).Return(f.abort).Maybe()
}

// mockTimedTable is mockTable with modelled durations: every Prepare takes prepare, and every
// CommitRound takes commit.
func mockTimedTable(env *testsuite.TestWorkflowEnvironment, f *fakeTable, prepare, commit time.Duration) {
	env.OnActivity(contract.PrepareActivity, anyCtx, anyArg).After(prepare).Return(f.prepare)
	env.OnActivity(contract.CommitRoundActivity, anyCtx, anyArg).After(commit).Return(f.commitRound)
	mockTable(env, f)
}

// hasShard reports whether a round commits a pass of shard.
func hasShard(p contract.CommitRoundParams, shard string) bool {
	for _, pm := range p.Prepared {
		if pm.Shard == shard {
			return true
		}
	}
	return false
}

// inflight tracks how many activities of each type run at once, from the test env's
// listeners (they run on the env's main loop, so no locking is needed).
type inflight struct {
	now, max map[string]int
	started  []string // activity types in start order
}

func trackInflight(env *testsuite.TestWorkflowEnvironment) *inflight {
	in := &inflight{now: map[string]int{}, max: map[string]int{}}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		name := info.ActivityType.Name
		in.now[name]++
		in.max[name] = max(in.max[name], in.now[name])
		in.started = append(in.started, name)
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		in.now[info.ActivityType.Name]--
	})
	return in
}

func appErrType(err error) (string, bool) {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type(), appErr.NonRetryable()
	}
	return "", false
}

// requireNonRetryable requires env's workflow to have failed non-retryably with an
// application error of type typ, and returns that error.
func requireNonRetryable(t *testing.T, env *testsuite.TestWorkflowEnvironment, typ string) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	require.Equal(t, typ, appErr.Type())
	require.True(t, appErr.NonRetryable())
	return appErr
}

// resultOf requires env's workflow to have completed without error and returns its result.
func resultOf[R any](t *testing.T, env *testsuite.TestWorkflowEnvironment) R {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res R
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func mergeResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) contract.MergeWalResult {
	t.Helper()
	return resultOf[contract.MergeWalResult](t, env)
}

func shardResult(t *testing.T, res contract.MergeWalResult, shard string) contract.ShardMergeResult {
	t.Helper()
	for _, s := range res.Shards {
		if s.Shard == shard {
			return s
		}
	}
	t.Fatalf("no result for shard %s in %+v", shard, res)
	return contract.ShardMergeResult{}
}

var anyCtx, anyArg = mock.Anything, mock.Anything
