package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// `walkeeper schedule ensure` changes what its flags name (interval, window, jitter) and keeps
// the sweep input the workers configured (--sweep-merge-min-generations, --sweep-max-starts,
// --sweep-start-batch, --sweep-start-spacing), which it has no flags for: the deploy's ensure
// job runs after the workers have ensured the schedule, and reset that input to the defaults.
func TestScheduleEnsureKeepsTheWorkersSweepInput(t *testing.T) {
	tn := newTemporalNS(t)
	c := tn.c
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// What a worker with tuned sweep knobs ensures on start (worker.ensureSchedules).
	workers := contract.MaintenanceSweepInput{MergeMinGenerations: 32, MaxStarts: 500, StartBatch: 50, StartSpacing: -1}
	require.NoError(t, temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{
		Every: time.Minute, Window: time.Hour, Jitter: temporaladmin.DefaultScheduleJitter, Input: workers}))

	tn.ok(t, "schedule", "ensure", "--every", "20s", "--window", "30m")

	d, err := temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	in, ok := temporaladmin.SweepWindowInputOf(d)
	require.True(t, ok, "the schedule's input must stay readable")
	assert.Equal(t, 20*time.Second, in.Interval, "the flags' interval applies")
	assert.Equal(t, 30*time.Minute, in.Window, "the flags' window applies")
	assert.Equal(t, workers, in.Sweep, "the workers' sweep input must survive the ensure job")
	require.Len(t, d.Schedule.Spec.Intervals, 1)
	assert.Equal(t, 30*time.Minute, d.Schedule.Spec.Intervals[0].Every)

	// A schedule that does not exist yet is created with the defaults.
	require.NoError(t, temporaladmin.DeleteSchedule(ctx, c, temporaladmin.SweepScheduleID))
	tn.ok(t, "schedule", "ensure", "--every", "1m")
	d, err = temporaladmin.DescribeSchedule(ctx, c, temporaladmin.SweepScheduleID)
	require.NoError(t, err)
	in, ok = temporaladmin.SweepWindowInputOf(d)
	require.True(t, ok)
	assert.Equal(t, contract.MaintenanceSweepInput{}, in.Sweep)
}
