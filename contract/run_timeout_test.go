package contract

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/walkeeper/walkeeper/target"
)

func TestEveryStartCarriesARunTimeout(t *testing.T) {
	tg, err := target.ParseTarget("generic:gs")
	require.NoError(t, err)
	c := &mocks.Client{}
	var got []time.Duration
	c.On("ExecuteWorkflow", mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		Run(func(args mock.Arguments) {
			got = append(got, args.Get(1).(client.StartWorkflowOptions).WorkflowRunTimeout)
		}).Return(&mocks.WorkflowRun{}, nil)

	ctx := context.Background()
	_, err = StartMergeWal(ctx, c, tg, MergeWalInput{})
	require.NoError(t, err)
	_, err = StartCompactBase(ctx, c, tg, CompactBaseInput{})
	require.NoError(t, err)
	_, err = StartMergeWal(ctx, c, tg, MergeWalInput{}, RunTimeout(90*time.Second))
	require.NoError(t, err)
	_, err = StartCompactBase(ctx, c, tg, CompactBaseInput{}, RunTimeout(3*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{DefaultMergeRunTimeout, DefaultMergeRunTimeout, 90 * time.Second, 3 * time.Hour}, got)

	// A run timeout out of bounds starts nothing: an unbounded run is what it exists to prevent.
	for _, d := range []time.Duration{0, -time.Second, MinMergeRunTimeout - 1, MaxMergeRunTimeout + 1} {
		_, err = StartMergeWal(ctx, c, tg, MergeWalInput{}, RunTimeout(d))
		require.ErrorContains(t, err, "run timeout", d.String())
		_, err = StartCompactBase(ctx, c, tg, CompactBaseInput{}, RunTimeout(d))
		require.ErrorContains(t, err, "run timeout", d.String())
	}
	require.Len(t, got, 4)
}

func TestRunContinueAfterIsHalfTheRunTimeout(t *testing.T) {
	require.Equal(t, time.Hour, RunContinueAfter(DefaultMergeRunTimeout))
	require.Equal(t, DefaultMergeRunTimeout/2, RunContinueAfter(0), "a run started without a timeout uses the default")
	require.Equal(t, 15*time.Second, RunContinueAfter(30*time.Second))
	// The default leaves the longest legitimate pass room to finish after the hand-over.
	require.Greater(t, DefaultMergeRunTimeout-RunContinueAfter(DefaultMergeRunTimeout), DefaultPrepareTimeout+7*time.Minute)
}
