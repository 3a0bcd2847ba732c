package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/contract"
)

// launchLog records when each StartWorkflows batch launched (workflow time since the
// first) and the most batches in flight at once.
type launchLog struct {
	mu       sync.Mutex
	first    time.Time
	at       map[string]time.Duration // batch's first target -> launch
	now, max int
}

func logLaunches(env *testsuite.TestWorkflowEnvironment) *launchLog {
	l := &launchLog{at: map[string]time.Duration{}}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != contract.StartWorkflowsActivity {
			return
		}
		var p contract.StartWorkflowsParams
		if err := args.Get(&p); err != nil || len(p.Starts) == 0 {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.first.IsZero() {
			l.first = env.Now()
		}
		l.at[p.Starts[0].Target] = env.Now().Sub(l.first)
		l.now++
		l.max = max(l.max, l.now)
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name != contract.StartWorkflowsActivity {
			return
		}
		l.mu.Lock()
		l.now--
		l.mu.Unlock()
	})
	return l
}

// runLateBatches runs a paged sweep of 8 batches of one start, StartSpacing 1 s,
// Concurrency 2, whose first two batches take 4.5 s (a late batch: it holds its slot past
// the planned times of the next ones) and the others no time, and returns when each batch
// launched, in debt order, and the most in flight.
func runLateBatches(t *testing.T, in contract.MaintenanceSweepInput) ([]time.Duration, int) {
	t.Helper()
	x := newPagedIndex()
	all := x.fill("generic", 8)
	env := newEnv(t)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(x.scan)
	starter := &fakeStarter{}
	slow := func(p contract.StartWorkflowsParams) bool {
		return len(p.Starts) > 0 && (p.Starts[0].Target == all[0].Target || p.Starts[0].Target == all[1].Target)
	}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, mock.MatchedBy(slow)).After(4500 * time.Millisecond).Return(starter.start)
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, mock.MatchedBy(func(p contract.StartWorkflowsParams) bool { return !slow(p) })).Return(starter.start)
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil).Maybe()
	l := logLaunches(env)
	in.MaxStarts, in.StartBatch, in.StartSpacing, in.Concurrency = 8, 1, time.Second, 2
	env.ExecuteWorkflow(MaintenanceSweep, in)
	res := resultOf[contract.MaintenanceSweepResult](t, env)
	require.Equal(t, 8, res.StartedCount())
	at := make([]time.Duration, len(all))
	for i, s := range all {
		d, ok := l.at[s.Target]
		require.True(t, ok, "batch %d launched", i)
		at[i] = d
	}
	return at, l.max
}

// Planned pacing: batch n launches at first + n × StartSpacing. The two slow batches hold
// both slots until 4.5 s and 5.5 s; batches 2, 3 and 4, due at 2, 3 and 4 s, launch
// together when the first slot frees (4.5 s), and batches 5, 6 and 7 on their planned
// times: the late ones did not push the later ones back, and never more than Concurrency
// batches were in flight.
func TestPagedSweepLateBatchDoesNotDelayLaterOnes(t *testing.T) {
	at, inflight := runLateBatches(t, contract.MaintenanceSweepInput{})
	s := time.Second
	require.Equal(t, []time.Duration{0, s, 4500 * time.Millisecond, 4500 * time.Millisecond, 4500 * time.Millisecond, 5 * s, 6 * s, 7 * s}, at)
	require.LessOrEqual(t, inflight, 2, "at most Concurrency batches in flight")
	for i := 1; i < len(at); i++ {
		require.GreaterOrEqual(t, at[i], time.Duration(i)*s, "batch %d not before its planned time", i)
	}
}
