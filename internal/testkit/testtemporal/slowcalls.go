package testtemporal

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
)

// RetryTimedOut calls fn until it returns something other than a timeout or ctx ends. The SDK
// gives each call 10 s whatever the caller's deadline and does not retry one that runs out,
// and a dev server on a CI machine saturated by other test processes can take longer to
// answer; a test that waits for an outcome should not fail on one slow answer.
//
// REQUIRES: fn is idempotent: a read, or a start deduplicated by its workflow ID (a start
// whose answer was lost may have started the workflow).
func RetryTimedOut(ctx context.Context, fn func(context.Context) error) error {
	for {
		err := fn(ctx)
		if err == nil || !timedOut(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// timedOut says whether err is a call's deadline, the client's or the server's.
func timedOut(err error) bool {
	var server *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &server)
}
