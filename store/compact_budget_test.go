package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCompactionMaxBytesFitsTheBudget(t *testing.T) {
	require.Equal(t, int64(0), compactionMaxBytes(0, 0), "unlimited budget, no cap")
	require.Equal(t, int64(7), compactionMaxBytes(7, 0))
	require.Equal(t, int64(1<<20), compactionMaxBytes(0, 4<<20))
	require.Equal(t, int64(1<<20), compactionMaxBytes(8<<20, 4<<20))
	require.Equal(t, int64(100), compactionMaxBytes(100, 4<<20))
	require.Equal(t, int64(1), compactionMaxBytes(0, 2), "a tiny budget still allows a pass")
	require.Equal(t, int64(4*30), compactionFootprint([]runMeta{{Bytes: 10}, {Bytes: 20}}))
}

// CompactBase takes its footprint from the process budget before reading, waits for it
// holding nothing, and gives it back.
func TestCompactBaseReservesFromTheBudget(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(64 << 20)
	db := openTestDB(t, "file://"+t.TempDir(), "w1", func(o *Options) { o.MergeMaxGenerations = 1; o.Budget = budget })
	s := createGeneric(t, db, "compact", false)
	for i := 0; i < 4; i++ {
		appendRows(t, s, row("same", int64(i)), row(fmt.Sprintf("k%d", i), int64(i)))
		flush(t, s)
	}
	_, err := s.MergeAll(ctx)
	require.NoError(t, err)
	want := allRows(t, s, SourceAll)

	held := mustReserve(t, budget, budget.Limit())
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.CompactBase(short, CompactParams{MaxRuns: -1})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a pass waits for the budget, it does not overdraw it")
	require.Equal(t, want, allRows(t, s, SourceAll))
	held.Release()

	res, err := s.CompactBase(ctx, CompactParams{MaxRuns: -1})
	require.NoError(t, err)
	require.True(t, res.Committed)
	require.Equal(t, 1, res.RunsLeft)
	require.Zero(t, budget.Reserved(), "the pass released its reservation")
	require.Equal(t, want, allRows(t, s, SourceAll))
}
