package temporaladmin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

// Unreachable and late answers are transient; anything Temporal did answer is not.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewUnavailable("connection refused"), true},
		{fmt.Errorf("describe schedule walkeeper-sweep: %w", serviceerror.NewDeadlineExceeded("context deadline exceeded")), true},
		{fmt.Errorf("update: %w", context.DeadlineExceeded), true},
		{serviceerror.NewNotFound("schedule not found"), false},
		{serviceerror.NewInvalidArgument("bad interval"), false},
		{errors.New("sweep schedule interval must be positive"), false},
		{nil, false},
	} {
		require.Equal(t, c.want, Transient(c.err), "%v", c.err)
	}
}

// RetryTransient retries transient errors until op succeeds, returns any other error at
// once, and gives up with the last error once within has passed.
func TestRetryTransient(t *testing.T) {
	ctx := context.Background()
	late := serviceerror.NewDeadlineExceeded("context deadline exceeded")

	calls, retried := 0, 0
	err := RetryTransient(ctx, time.Minute, func(error) { retried++ }, func(context.Context) error {
		if calls++; calls < 3 {
			return late
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.Equal(t, 2, retried)

	calls = 0
	refused := serviceerror.NewInvalidArgument("bad interval")
	err = RetryTransient(ctx, time.Minute, nil, func(context.Context) error { calls++; return refused })
	require.ErrorIs(t, err, refused)
	require.Equal(t, 1, calls)

	// The first wait (1 s) fits in 2.5 s, the second (2 s) cannot: two attempts at most
	// (one, on a machine that stalls the test for over 1.5 s).
	calls = 0
	err = RetryTransient(ctx, 2500*time.Millisecond, nil, func(context.Context) error { calls++; return late })
	require.ErrorIs(t, err, late)
	require.ErrorContains(t, err, "retried for 2.5s")
	require.LessOrEqual(t, calls, 2)

	// A canceled caller stops the retries.
	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = RetryTransient(cctx, time.Minute, func(error) { cancel() }, func(context.Context) error { calls++; return late })
	require.ErrorIs(t, err, late)
	require.Equal(t, 1, calls)
}
