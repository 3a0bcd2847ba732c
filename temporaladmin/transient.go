package temporaladmin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
)

// Transient reports whether err is Temporal not answering yet or not in time, as a server
// just started does.
func Transient(err error) bool {
	return errors.As(err, new(*serviceerror.Unavailable)) || errors.As(err, new(*serviceerror.DeadlineExceeded)) ||
		errors.Is(err, context.DeadlineExceeded)
}

// EnsureWithin bounds how long `walkeeper schedule ensure` and a starting worker retry
// ensuring a schedule, and the worker registering the search attributes, on a Temporal that
// answers late or not at all (RetryTransient).
const EnsureWithin = 2 * time.Minute

// RetryTransient runs op until it returns nil or an error that is not Transient, or until
// within has passed, waiting 1 s doubling to 10 s between attempts and calling retrying.
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
