package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// fakeRegistry pages a registry of n stores per kind, pageSize at a time.
type fakeRegistry struct {
	n     int
	calls []contract.ReconcilePageParams
}

func (f *fakeRegistry) page(_ context.Context, p contract.ReconcilePageParams) (contract.ReconcilePageResult, error) {
	f.calls = append(f.calls, p)
	start := 0
	if p.After != "" {
		_, _ = fmt.Sscanf(p.After, "s%06d", &start)
		start++
	}
	end := min(start+p.Limit, f.n)
	res := contract.ReconcilePageResult{Kind: p.Kind, Counts: contract.ReconcileCounts{Stores: end - start, Pages: 1, Missing: 1}}
	if start == 0 && p.Kind == "generic" {
		res.Counts.Unreadable = 1
		res.Problems = []contract.StoreProblem{{Target: "generic:s000000", Error: "corrupt"}}
	}
	if end < f.n {
		res.Next = fmt.Sprintf("s%06d", end-1)
	}
	return res, nil
}

// A reconcile pages through every kind and continues as new every PagesPerRun pages,
// carrying the cursor and totals, so its history stays bounded at any fleet size.
func TestReconcileDemandPagesAndContinuesAsNew(t *testing.T) {
	reg := &fakeRegistry{n: 25}
	in := contract.ReconcileDemandInput{PageSize: contract.MinReconcilePage, PagesPerRun: 2}
	for run := 0; ; run++ {
		require.Less(t, run, 20, "the reconcile must end")
		env := newEnv(t)
		env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(reg.page)
		if run > 0 {
			env.SetContinuedExecutionRunID(fmt.Sprintf("run-%d", run))
		}
		env.ExecuteWorkflow(ReconcileDemand, in)
		if err := env.GetWorkflowError(); errors.As(err, new(*workflow.ContinueAsNewError)) {
			in = continuedInput[contract.ReconcileDemandInput](t, err, contract.ReconcileDemandWorkflow)
			require.Equal(t, run+1, in.Runs)
			continue
		}
		res := resultOf[contract.ReconcileDemandResult](t, env)
		// 25 stores in pages of 10 = 3 pages per kind.
		require.Equal(t, 3*len(target.Kinds), res.Totals.Pages)
		require.Equal(t, 25*len(target.Kinds), res.Totals.Stores)
		require.Equal(t, 3*len(target.Kinds), res.Totals.Missing)
		require.Equal(t, 1, res.Totals.Unreadable)
		require.Len(t, res.Problems, 1)
		require.Equal(t, 5, res.Runs, "9 pages at 2 per run")
		break
	}
	// Every page started after the previous page's last store.
	for i := 1; i < len(reg.calls); i++ {
		prev, cur := reg.calls[i-1], reg.calls[i]
		if prev.Kind == cur.Kind {
			require.NotEmpty(t, cur.After)
		} else {
			require.Empty(t, cur.After)
		}
	}
}

// A reconcile keeps the first MaxReconcileUnreadable problems its pages report, in page
// order, and counts them all.
func TestReconcileDemandCapsItsProblems(t *testing.T) {
	env := newEnv(t)
	pages := 0
	env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(func(_ context.Context, p contract.ReconcilePageParams) (contract.ReconcilePageResult, error) {
		res := contract.ReconcilePageResult{Kind: p.Kind, Counts: contract.ReconcileCounts{Pages: 1, Unreadable: 30}}
		for i := range 30 {
			res.Problems = append(res.Problems, contract.StoreProblem{Target: fmt.Sprintf("%s:p%d-%02d", p.Kind, pages, i), Error: "corrupt"})
		}
		pages++
		return res, nil
	})
	env.ExecuteWorkflow(ReconcileDemand, contract.ReconcileDemandInput{})
	res := resultOf[contract.ReconcileDemandResult](t, env)
	require.Equal(t, 30*len(target.Kinds), res.Totals.Unreadable)
	require.Len(t, res.Problems, contract.MaxReconcileUnreadable)
	k0, k1 := target.Kinds[0], target.Kinds[1]
	require.Equal(t, fmt.Sprintf("%s:p0-00", k0), res.Problems[0].Target)
	require.Equal(t, fmt.Sprintf("%s:p0-29", k0), res.Problems[29].Target)
	require.Equal(t, fmt.Sprintf("%s:p1-00", k1), res.Problems[30].Target)
	require.Equal(t, fmt.Sprintf("%s:p1-19", k1), res.Problems[contract.MaxReconcileUnreadable-1].Target)
}

// A problem's error is carried across continue-as-new, so the reconcile keeps it within the
// carry's bound: a longer one would fail the continued run as invalid input, and every later
// reconcile would stop at the same unreadable store.
func TestReconcileDemandCarriesALongProblemClipped(t *testing.T) {
	env := newEnv(t)
	long := strings.Repeat("x", 70<<10)
	env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(func(_ context.Context, p contract.ReconcilePageParams) (contract.ReconcilePageResult, error) {
		return contract.ReconcilePageResult{Kind: p.Kind, Next: "s1", Counts: contract.ReconcileCounts{Stores: 1, Pages: 1, Unreadable: 1},
			Problems: []contract.StoreProblem{{Target: p.Kind + ":s1", Error: long, ErrorType: contract.ErrTypeCorruptData}}}, nil
	})
	env.ExecuteWorkflow(ReconcileDemand, contract.ReconcileDemandInput{PagesPerRun: 1})
	next := continuedInput[contract.ReconcileDemandInput](t, env.GetWorkflowError(), contract.ReconcileDemandWorkflow)
	require.NoError(t, next.Validate(), "the continued run accepts what its predecessor carried")
	require.Len(t, next.Problems, 1)
	require.LessOrEqual(t, len(next.Problems[0].Error), contract.MaxFailureTextBytes)
	require.True(t, strings.HasPrefix(next.Problems[0].Error, "xxx"))
}

// A page that cannot be listed after the activity's retries fails the reconcile with a
// non-retryable ReconcileFailed naming the kind and cursor.
func TestReconcileDemandFailsLoudly(t *testing.T) {
	env := newEnv(t)
	attempts := 0
	env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(func(context.Context, contract.ReconcilePageParams) (contract.ReconcilePageResult, error) {
		attempts++
		return contract.ReconcilePageResult{}, errors.New("list _registry/generic/: access denied")
	})
	env.ExecuteWorkflow(ReconcileDemand, contract.ReconcileDemandInput{})
	appErr := requireNonRetryable(t, env, contract.ErrTypeReconcileFailed)
	require.Contains(t, appErr.Error(), string(target.Kinds[0]))
	require.Equal(t, 5, attempts)
}

// An operator's Cancel of the reconcile ends the run Canceled: the page's cancellation is the
// cause of the ReconcileFailed error the run returns, and the SDK closes a run whose error
// holds a CanceledError as cancelled, not failed.
func TestReconcileDemandCancelledDuringAPageEndsCanceled(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(contract.ReconcilePageActivity, anyCtx, anyArg).Return(func(ctx context.Context, _ contract.ReconcilePageParams) (contract.ReconcilePageResult, error) {
		<-ctx.Done()
		return contract.ReconcilePageResult{}, ctx.Err()
	})
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(ReconcileDemand, contract.ReconcileDemandInput{})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "got %v", err)
}
