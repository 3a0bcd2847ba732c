package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// TestFindingClaimRacingANewerOwnersSealIsFenced: a process claims its shard and replays the
// WAL it listed, while another process with the same instance id claims after it, seals and
// deletes that WAL. The replay's read of a listed object then finds nothing. The first
// process was fenced; it answered ErrNotFound, which the HTTP API maps to 404 not_found for an
// append to a store that exists, and Temporal does not retry.
func TestFindingClaimRacingANewerOwnersSealIsFenced(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	first := createGeneric(t, openTestDB(t, url, "w"), "raced", false)
	appendRows(t, first, row("a", 1), row("b", 2)) // unsealed: in the WAL only

	claimer := openTestDB(t, url, "w")
	s := openGeneric(t, claimer, "raced")
	newer := openGeneric(t, openTestDB(t, url, "w"), "raced")
	var armed atomic.Bool
	armed.Store(true)
	claimer.bucket = claimer.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.Contains(key, "/wal/") && armed.CompareAndSwap(true, false) {
			// The newer owner claims, replays, seals and deletes the WAL in between.
			flush(t, newer)
		}
		return nil
	}})
	_, err := s.Append(ctx, []Row{row("c", 3)})
	require.False(t, armed.Load(), "the newer owner sealed during the claim's replay")
	require.ErrorIs(t, err, ErrFenced)
	require.NotErrorIs(t, err, ErrNotFound)

	require.NoError(t, errOf(s.Append(ctx, []Row{row("c", 3)}))) // a client's retry claims the shard again
	flush(t, s)
	reader := openGeneric(t, openTestDB(t, url, "r"), "raced")
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, reader, SourceAll))
}

// A WAL write that lands more than walAckWindow after its rows were sequenced is answered as
// stalled, not acknowledged: a compaction may by then have dropped a tombstone it would have
// had to see. Its rows are durable and read, and the writer goes on.
func TestWALWriteLandingPastTheAckWindowIsNotAcknowledged(t *testing.T) {
	ctx := context.Background()
	var ahead atomic.Int64
	db := openTestDB(t, newMemURL(), "w1", aheadClock(&ahead))
	s := createGeneric(t, db, "late", false)
	appendRows(t, s, row("a", 0)) // the shard is claimed: the next WAL put is an append's
	var armed atomic.Bool
	armed.Store(true)
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.HasPrefix(key, walPrefix(s.target, db.Shard())) && armed.CompareAndSwap(true, false) {
			ahead.Store(int64(walAckWindow + time.Second)) // the put outlasts the window
		}
		return nil
	}})
	_, err := s.Append(ctx, []Row{row("k", 1)})
	require.ErrorIs(t, err, ErrStalled)
	require.ErrorContains(t, err, "not acknowledged")
	require.Equal(t, 1.0, testutil.ToFloat64(db.metrics.WALWritesLate))
	require.Equal(t, map[string]int64{"a": 0, "k": 1}, allRows(t, s, SourceAll), "the late write is durable and read")

	appendRows(t, s, row("k", 2))
	require.Equal(t, map[string]int64{"a": 0, "k": 2}, allRows(t, s, SourceAll))
}
