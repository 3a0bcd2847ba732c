package testtemporal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
)

func TestRetryTimedOutRetriesOnlyTimeouts(t *testing.T) {
	calls := 0
	err := RetryTimedOut(context.Background(), func(context.Context) error {
		calls++
		switch calls {
		case 1:
			return serviceerror.NewDeadlineExceeded("context deadline exceeded")
		case 2:
			return fmt.Errorf("start: %w", context.DeadlineExceeded)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("two timeouts then success: err %v after %d calls, want nil after 3", err, calls)
	}

	refused := serviceerror.NewInvalidArgument("bad")
	calls = 0
	err = RetryTimedOut(context.Background(), func(context.Context) error { calls++; return refused })
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("a refusal: err %v after %d calls, want it after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = RetryTimedOut(ctx, func(context.Context) error {
		calls++
		cancel()
		return context.DeadlineExceeded
	})
	if !errors.Is(err, context.DeadlineExceeded) || calls != 1 {
		t.Fatalf("the caller's context ended: err %v after %d calls, want its timeout after 1", err, calls)
	}
}
