package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

func TestToTemporalMapsEveryMark(t *testing.T) {
	cases := []struct {
		mark         error
		errType      string
		nonRetryable bool
	}{
		{store.ErrInvalidInput, "InvalidInput", true},
		{store.ErrKeyTooLong, "InvalidInput", true},
		{store.ErrAppendTooLarge, "InvalidInput", true},
		{store.ErrCorrupt, "CorruptData", true},
		{store.ErrNotFound, "NotFound", true},
		{store.ErrStalePreparation, "StalePreparation", true},
		{store.ErrConflict, "Conflict", false},
		{store.ErrBudgetBusy, "BudgetBusy", false},
		{store.ErrFenced, "Fenced", false},
		{store.ErrTooManyPending, "TooManyPending", false},
		{store.ErrAlreadyExists, "AlreadyExists", false},
		{store.ErrClosed, "Closed", false},
		{errors.New("disk on fire"), "Internal", false},
	}
	for _, c := range cases {
		t.Run(c.errType, func(t *testing.T) {
			// Wrapped twice, the way the store reports errors.
			orig := fmt.Errorf("merge generic:gs: %w", fmt.Errorf("read gen 7: %w", c.mark))
			mapped := ToTemporal(orig)
			appErr := requireAppErr(t, mapped, c.errType, c.nonRetryable)
			require.Contains(t, appErr.Error(), "read gen 7", "the message keeps the store's context")
			require.True(t, errors.Is(mapped, c.mark), "wrapping is preserved")
			require.Equal(t, c.errType, ErrorType(orig))
			require.Equal(t, c.errType, ErrorType(mapped))
			// Non-retryable types are exactly the ones every retry policy lists.
			require.Equal(t, c.nonRetryable, slices.Contains(contract.NonRetryableErrorTypes, c.errType))
		})
	}
}

// A workflow input out of bounds (contract's Validate) maps like any invalid input: the one
// table needs no entry of its own.
func TestToTemporalMapsAnInputError(t *testing.T) {
	err := contract.MaintenanceSweepInput{Concurrency: 100_000}.Validate()
	appErr := requireAppErr(t, ToTemporal(err), contract.ErrTypeInvalidInput, true)
	require.Contains(t, appErr.Error(), "invalid input: concurrency: 100000 is above the ceiling 32")
}

// The Temporal frontend's refusals are halts; its busy and unavailable answers retry.
func TestToTemporalMapsFrontendRefusals(t *testing.T) {
	for _, c := range []struct {
		err          error
		errType      string
		nonRetryable bool
	}{
		{serviceerror.NewInvalidArgument("WorkflowId length exceeds limit"), contract.ErrTypeInvalidInput, true},
		{serviceerror.NewNamespaceNotFound("walkeeper"), contract.ErrTypeMisconfigured, true},
		{serviceerror.NewPermissionDenied("no", ""), contract.ErrTypeMisconfigured, true},
		{contract.ErrWorkflowIDTaken, contract.ErrTypeStartFailed, true},
		{serviceerror.NewUnavailable("restarting"), contract.ErrTypeInternal, false},
		{serviceerror.NewResourceExhausted(0, "rps limit"), contract.ErrTypeInternal, false},
		{serviceerror.NewNamespaceNotActive("walkeeper", "a", "b"), contract.ErrTypeInternal, false},
	} {
		wrapped := fmt.Errorf("start merge-wal/generic/gs: %w", c.err)
		requireAppErr(t, ToTemporal(wrapped), c.errType, c.nonRetryable)
		require.Equal(t, c.nonRetryable, RefusedForGood(wrapped), "%v", c.err)
	}
	require.False(t, RefusedForGood(context.DeadlineExceeded))
	require.True(t, RefusedForGood(fmt.Errorf("target: %w", store.ErrInvalidInput)))
}

func TestToTemporalHaltWinsOverRetry(t *testing.T) {
	both := errors.Join(fmt.Errorf("cas lost: %w", store.ErrConflict), fmt.Errorf("manifest: %w", store.ErrCorrupt))
	requireAppErr(t, ToTemporal(both), "CorruptData", true)
}

func TestToTemporalPassThrough(t *testing.T) {
	require.NoError(t, ToTemporal(nil))
	require.Equal(t, "", ErrorType(nil))
	require.Same(t, context.Canceled, ToTemporal(context.Canceled))
	wrappedDeadline := fmt.Errorf("put: %w", context.DeadlineExceeded)
	require.Equal(t, wrappedDeadline, ToTemporal(wrappedDeadline))
	already := temporal.NewApplicationError("x", "Custom")
	require.Equal(t, already, ToTemporal(already))
	require.Equal(t, "Custom", ErrorType(already))

	requireAppErr(t, ToTemporal(errWorkerStopping), "Closed", false)
}

func TestMappedErrorsSurviveTheActivityBoundary(t *testing.T) {
	marks := map[string]error{"stale": store.ErrStalePreparation, "corrupt": store.ErrCorrupt, "busy": store.ErrBudgetBusy}
	env := newActivityEnv(t, &Activities{})
	env.RegisterActivityWithOptions(func(ctx context.Context, mark string) error {
		return ToTemporal(fmt.Errorf("boom: %w", marks[mark]))
	}, activity.RegisterOptions{Name: "fail"})
	for mark, want := range map[string]struct {
		typ          string
		nonRetryable bool
	}{
		"stale":   {"StalePreparation", true},
		"corrupt": {"CorruptData", true},
		"busy":    {"BudgetBusy", false},
	} {
		_, err := env.ExecuteActivity("fail", mark)
		requireAppErr(t, err, want.typ, want.nonRetryable)
	}
}
