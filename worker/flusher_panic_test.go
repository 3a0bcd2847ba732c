package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/panictest"
	"github.com/walkeeper/walkeeper/store"
)

// The flush sweeper seals each store in a goroutine of its own, whose panic would end the
// process: it is the seal's error, logged with its stack and counted, the store is no longer
// marked as sealing, and the next pass seals it instead of skipping it for good.
func TestFindingAPanicInASweeperSealFailsThatSealOnly(t *testing.T) {
	m := NewMetrics(nil)
	db, _, ge := testDB(t, m)
	appendIDs(t, ge, "g1")
	core, logs := observer.New(zapcore.DebugLevel)
	var panics atomic.Int32
	panics.Store(1)
	sw := testFlusher(t, FlusherOptions{Timeout: 5 * time.Second, Logger: zap.New(core), Metrics: m, Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			if panics.Add(-1) == 0 {
				panictest.Injected()
				panic("injected: a seal panicked")
			}
			return s.Flush(ctx)
		}})
	before := store.RecoveredPanics()

	sw.FlushKind(context.Background(), store.KindGeneric)
	require.Equal(t, before+1, store.RecoveredPanics())
	lines := logs.FilterMessage("goroutine panicked").All()
	require.Len(t, lines, 1)
	require.Equal(t, "flush sweeper seal", lines[0].ContextMap()["where"])

	sw.FlushKind(context.Background(), store.KindGeneric)
	require.Zero(t, testutil.ToFloat64(m.flusherSkipped.WithLabelValues("generic")), "the store was skipped as still sealing")
	require.Equal(t, 1.0, testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("generic", "sealed")))
}

// A count trigger starts MergeWal in a goroutine of its own, whose panic would end the
// process: it is that start's failure, logged and counted, the store's start is no longer in
// flight, and the next pass retries it.
func TestFindingAPanicInATriggerStartFailsThatStart(t *testing.T) {
	m := NewMetrics(nil)
	db, _, ge := testDB(t, m)
	var starts atomic.Int32
	start := func(ctx context.Context, tg store.Target, in contract.MergeWalInput, _ ...contract.StartOption) (client.WorkflowRun, error) {
		if starts.Add(1) == 1 {
			panictest.Injected()
			panic("injected: the start panicked")
		}
		run := &mocks.WorkflowRun{}
		run.On("GetID").Return(contract.MergeWalID(tg))
		run.On("GetRunID").Return("r1")
		return run, nil
	}
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: start,
		Logger: zap.NewNop(), Metrics: m, Resident: db.Resident})
	before := store.RecoveredPanics()

	appendIDs(t, ge, "g1")
	sw.FlushOnce(context.Background())
	require.Equal(t, int32(1), starts.Load())
	require.Equal(t, before+1, store.RecoveredPanics())
	require.Equal(t, 1.0, testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultFailed)))

	sw.FlushOnce(context.Background()) // seals nothing; the failed start is retried
	require.Equal(t, int32(2), starts.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultStarted)))
}
