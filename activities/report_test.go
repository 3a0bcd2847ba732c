package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// signalRecorder is a client that records the activity state signals it is asked to send.
type signalRecorder struct {
	*mocks.Client
	mu  sync.Mutex
	got []contract.ActivityState
}

func newSignalRecorder() *signalRecorder {
	r := &signalRecorder{Client: &mocks.Client{}}
	r.On("SignalWorkflow", mock.Anything, mock.Anything, mock.Anything, contract.ActivityStateSignal, mock.Anything).
		Run(func(args mock.Arguments) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.got = append(r.got, args.Get(4).(contract.ActivityState))
		}).Return(nil).Maybe()
	return r
}

func (r *signalRecorder) states() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.got {
		out = append(out, fmt.Sprintf("%s@%d", s.State, s.Attempt))
	}
	return out
}

// signal is the i-th state signalled.
func (r *signalRecorder) signal(i int) contract.ActivityState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[i]
}

// runBackoffProbe runs an activity whose first attempt fails with first into a retry and
// returns the states it signalled.
func runBackoffProbe(t *testing.T, first error) *signalRecorder {
	rec := newSignalRecorder()
	a := &Activities{Client: rec}
	probe := func(ctx context.Context) error {
		rep := a.startReporter(ctx, time.Nanosecond, nil)
		time.Sleep(50 * time.Millisecond) // past the (tiny) notify threshold
		var err error
		if activity.GetInfo(ctx).Attempt == 1 {
			err = ToTemporal(first)
		}
		rep.finish(err)
		return err
	}
	env := newTestWorkflowEnv()
	env.RegisterActivityWithOptions(probe, activity.RegisterOptions{Name: "probe"})
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2, InitialInterval: time.Second},
		})
		return workflow.ExecuteActivity(ctx, "probe").Get(ctx, nil)
	})
	require.NoError(t, env.GetWorkflowError())
	return rec
}

// A pass that runs straight through signals nothing; the backoff and the next attempt go out.
func TestReporterSignalsBackoffAndNextAttempt(t *testing.T) {
	rec := runBackoffProbe(t, fmt.Errorf("first generation: %w", store.ErrBudgetBusy))
	require.Equal(t, []string{"retrying@1", "running@2"}, rec.states())
	require.Contains(t, rec.signal(0).Error, "merge memory budget busy")
}

// A retry's signal carries its error cut to MaxFailureTextBytes of JSON, where it carried the
// whole text, a signal and a history event per retry of up to a payload's size (the workflow
// kept 4 KiB of it).
func TestFindingBackoffSignalCutsItsError(t *testing.T) {
	rec := runBackoffProbe(t, fmt.Errorf("first generation: %s: %w", strings.Repeat("<", contract.MaxPayloadBytes), store.ErrBudgetBusy))
	require.Equal(t, []string{"retrying@1", "running@2"}, rec.states())
	got := rec.signal(0)
	raw, err := json.Marshal(got)
	require.NoError(t, err)
	require.Less(t, len(raw), contract.MaxFailureTextBytes+256)
	require.True(t, strings.HasPrefix(got.Error, "first generation: <<<"), "%.40s", got.Error)
}

func TestReporterStaysQuietWithoutNotifyAfter(t *testing.T) {
	rec := newSignalRecorder()
	a := &Activities{Client: rec}
	probe := func(ctx context.Context) error {
		rep := a.startReporter(ctx, 0, nil)
		time.Sleep(10 * time.Millisecond)
		err := ToTemporal(store.ErrConflict)
		rep.finish(err)
		return err
	}
	env := newActivityEnv(t, a)
	env.RegisterActivityWithOptions(probe, activity.RegisterOptions{Name: "probe"})
	_, err := env.ExecuteActivity("probe")
	require.Error(t, err)
	require.Empty(t, rec.states())
}

func TestPrepareReportsBudgetWait(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the budget-wait hint")
	}
	ctx := context.Background()
	budget := store.NewBudget(1 << 20)
	db := openDB(t, memURL(t), "w1", func(o *store.Options) { o.Budget = budget })
	seal(t, db, "generic:gs", []string{"a"}, []string{"b"})

	// Someone else holds the whole budget until the prepare has reported its wait (or a
	// minute has passed, and the check below fails).
	held, _, err := budget.Reserve(ctx, 1<<20)
	require.NoError(t, err)
	rec := newSignalRecorder()
	go func() {
		defer held.Release()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if slices.Contains(rec.states(), "waiting_budget@1") {
				return
			}
		}
	}()

	env := newActivityEnv(t, &Activities{DB: db, Client: rec})
	prep := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity,
		contract.PrepareParams{Target: "generic:gs", Shard: db.Shard(), NotifyAfter: time.Hour})
	require.NotNil(t, prep.Prepared)
	require.Equal(t, []string{"waiting_budget@1", "running@1"}, rec.states())
}

func TestPrepareSignalsBackoffOnRetryableFailure(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memURL(t), "w1")
	require.NoError(t, db.Close(ctx))
	rec := newSignalRecorder()
	env := newActivityEnv(t, &Activities{DB: db, Client: rec})
	_, err := run[contract.PrepareResult](t, env, contract.PrepareActivity,
		contract.PrepareParams{Target: "generic:gs", Shard: "s", NotifyAfter: time.Hour})
	requireAppErr(t, err, contract.ErrTypeClosed, false)
	require.Equal(t, []string{"retrying@1"}, rec.states(), "the workflow learns it backs off, and why")
	require.Contains(t, rec.signal(0).Error, "closed")
}

// Progress is recorded between ticks and goes out with the next heartbeat of the reporter's
// loop, not at once.
func TestReporterHeartbeatsProgressOnItsTick(t *testing.T) {
	a := &Activities{}
	var beats []contract.PrepareProgress
	runUnderHeartbeatTimeout(t, func(firstBeat func()) any {
		return func(ctx context.Context) error {
			rep := a.startReporter(ctx, 0, contract.PrepareProgress{State: contract.PrepareStateStarting})
			rep.progress(contract.PrepareProgress{State: contract.ActivityStateRunning, Done: 1, Total: 2})
			firstBeat()
			rep.finish(nil)
			return nil
		}
	}, func(details converter.EncodedValues) {
		var p contract.PrepareProgress
		require.NoError(t, details.Get(&p))
		beats = append(beats, p)
	})
	require.NotEmpty(t, beats, "the tick sends the recorded progress")
	require.Equal(t, contract.PrepareProgress{State: contract.ActivityStateRunning, Done: 1, Total: 2}, beats[0])
}
