package temporaladmin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
)

// Transient reports whether err is Temporal not answering yet or not in time (unreachable,
// or a request past its deadline): what a server that has just started answers until its
// services, and the workflows behind schedules, are loaded.
func Transient(err error) bool {
	return errors.As(err, new(*serviceerror.Unavailable)) || errors.As(err, new(*serviceerror.DeadlineExceeded)) ||
		errors.Is(err, context.DeadlineExceeded)
}

// EnsureWithin bounds how long `walkeeper schedule ensure` and a starting worker retry
// ensuring a schedule on a Temporal that answers late or not at all (RetryTransient).
const EnsureWithin = 2 * time.Minute

// RetryTransient runs op until it returns nil or an error that is not Transient, or until
// within has passed; then it returns op's last error. Between attempts it waits 1 s,
// doubling up to 10 s, and calls retrying with the error it retries (may be nil).
//
// REQUIRES: op is idempotent.
func RetryTransient(ctx context.Context, within time.Duration, retrying func(error), op func(context.Context) error) error {
	deadline := time.Now().Add(within)
	wait := time.Second
	for {
		err := op(ctx)
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (retried for %s)", err, within)
		}
		if retrying != nil {
			retrying(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}
