package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/store"
)

// A start Temporal does not answer in time is tried again (a repeated start attaches to the
// run an earlier one made), saying so on stderr; a start Temporal refuses is not.
func TestStartRetriesAStartThatTimedOut(t *testing.T) {
	tgt := store.Target{Kind: store.KindGeneric, Name: "slow"}
	calls := 0
	var stderr strings.Builder
	_, err := startRetrying(context.Background(), &stderr, "MergeWal", tgt, func(context.Context) (client.WorkflowRun, error) {
		calls++
		if calls < 3 {
			return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
		}
		return nil, nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, 2, strings.Count(stderr.String(), "retrying\n"), stderr.String())

	calls = 0
	_, err = startRetrying(context.Background(), &stderr, "MergeWal", tgt, func(context.Context) (client.WorkflowRun, error) {
		calls++
		return nil, serviceerror.NewInvalidArgument("bad request")
	})
	assert.Error(t, err)
	assert.Equal(t, 1, calls, "a refused start is not retried")
}

// blockedRun is a run whose result never comes: Get returns when its context ends, as the
// SDK's does.
type blockedRun struct{ client.WorkflowRun }

func (blockedRun) GetID() string    { return "merge-wal/generic/slow" }
func (blockedRun) GetRunID() string { return "r1" }
func (blockedRun) Get(ctx context.Context, _ any) error {
	<-ctx.Done()
	return ctx.Err()
}

// --timeout gives up waiting, and the line says so and that the run goes on, rather than a
// bare "context deadline exceeded" that reads as a failed merge.
func TestWaitTimeoutSaysTheRunGoesOn(t *testing.T) {
	var out strings.Builder
	err := reportRun(context.Background(), &out, blockedRun{}, "MergeWal", "generic:slow", true, time.Millisecond)
	assert.Equal(t, "MergeWal generic:slow (workflow merge-wal/generic/slow, run r1): gave up waiting after 1ms (--timeout); the run goes on",
		errorLine(err))
}
