package store

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A read whose base run's footer asks for more than the budget has free right now is admitted
// once more with those bytes, holding nothing while it waits: a budget that frees them within
// the read's wait admits it, and one that does not answers ErrBudgetBusy, counted once.
func TestRunDecodeRetryWaitsForTheBudgetAndCountsItsRefusal(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(32 << 20)
	m := NewMetrics(prometheus.NewRegistry(), nil)
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 128 << 20 // keeps the run decoded
		o.Metrics = m
	})
	s, run := compressibleRun(t, db, "retrywaits")

	// Room for the first admission (twice the object), not for the decode its footer gives.
	held := mustReserve(t, rb, rb.Limit()-2*readCost(readSource{path: run.Path, run: true, bytes: run.Bytes}))
	released := make(chan struct{})
	go func() {
		defer close(released)
		deadline := time.Now().Add(time.Minute)
		for rb.Waiting() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		held.Release()
	}()
	got, err := s.Get(ctx, "k000100")
	<-released
	require.NoError(t, err, "the retry waited for the bytes the footer asked for")
	require.Equal(t, "k000100", got["id"])
	require.Zero(t, testutil.ToFloat64(m.ReadsBudgetBusy))

	db.cache.forget(run.Path)
	held = mustReserve(t, rb, rb.Limit()-2*readCost(readSource{path: run.Path, run: true, bytes: run.Bytes}))
	require.ErrorIs(t, errOf(s.Get(ctx, "k000100")), ErrBudgetBusy, "the bytes never came within the read's wait")
	require.Equal(t, 1.0, testutil.ToFloat64(m.ReadsBudgetBusy), "the refusal is counted once")
	held.Release()
	require.Zero(t, rb.Reserved())
}

// Every way the budget can refuse a read (the admission's wait, a run's footer asking more
// than the cache keeps or than the reservation could grow by, a streamed batch overdrawing its
// account) answers ErrBudgetBusy and counts the read once in walkeeper_read_budget_busy_total;
// before, only the first two were counted.
func TestEveryBudgetRefusalOfAReadIsCountedOnce(t *testing.T) {
	ctx := context.Background()
	m := NewMetrics(prometheus.NewRegistry(), nil)
	_, s := newGenericStore(t, newMemURL(), "busycount", func(o *Options) { o.Metrics = m })
	overdrawn := &memAccount{}
	overdrawn.overdrawn.Store(1)
	refusals := []error{
		errReadBudgetWait,
		errRunDecodesLarge,
		&runDecodeShort{path: "data/r.parquet", extra: 1},
		overdrawn.err(),
	}
	for i, refusal := range refusals {
		require.ErrorIs(t, errOf(resnapshotOnMissing(ctx, s, func() (int, error) { return 0, refusal })), ErrBudgetBusy)
		require.Equal(t, float64(i+1), testutil.ToFloat64(m.ReadsBudgetBusy), "refusal %d: %v", i, refusal)
	}
	require.ErrorIs(t, errOf(resnapshotOnMissing(ctx, s, func() (int, error) { return 0, ErrInvalidInput })), ErrInvalidInput)
	require.Equal(t, float64(len(refusals)), testutil.ToFloat64(m.ReadsBudgetBusy), "another error is not counted")
}
