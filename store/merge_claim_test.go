package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// claimExists reports whether the attempt's claim object is still in storage.
func claimExists(t *testing.T, s *Store, p *PreparedMerge) bool {
	t.Helper()
	ok, err := s.db.bucket.Exists(context.Background(), s.claimKey(p))
	require.NoError(t, err)
	return ok
}

// Claims are collected as soon as the watermark makes them meaningless, and kept exactly
// while they still stop something: an abort claim below the watermark is what keeps a late
// commit of that attempt from publishing.
func TestAttemptClaimsDoNotAccumulate(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "claims")

	// A committed attempt leaves no claim, and neither does a late Abort of it.
	seal(t, s, row("a", 1))
	p, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/a"})
	require.NoError(t, err)
	_, err = commitOne(ctx, s, p)
	require.NoError(t, err)
	require.False(t, claimExists(t, s, p), "commit claim left after a successful commit")
	ar, err := s.Abort(ctx, p)
	require.NoError(t, err)
	require.True(t, ar.CommitPresent)
	require.False(t, claimExists(t, s, p), "abort of a committed attempt left a claim")

	// An abort below the watermark keeps its claim: it is what refuses a late commit.
	seal(t, s, row("b", 2))
	stale, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/b"})
	require.NoError(t, err)
	_, err = s.Abort(ctx, stale)
	require.NoError(t, err)
	require.True(t, claimExists(t, s, stale), "an abort below the watermark must keep its claim")
	_, err = commitOne(ctx, s, stale)
	require.ErrorIs(t, err, ErrStalePreparation)

	// Another attempt merges the same generation: the round that moves the watermark past
	// the aborted range collects the claim (collectSettledClaims), and aborting the stale one
	// again leaves none either.
	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	require.False(t, claimExists(t, s, stale), "the round that covered the aborted range left its claim")
	_, err = s.Abort(ctx, stale)
	require.NoError(t, err)
	require.False(t, claimExists(t, s, stale), "claim kept although no commit of the attempt can publish")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceBase))
}

// A reset run retries the old run's Prepare attempt while the old run's commit of it is still
// on a worker, claimed "commit" and about to publish. The retry plans a longer range (more was
// sealed) and must not delete the staged run the claimed commit publishes: the base would name
// a missing object.
func TestRetriedPrepareKeepsTheRunOfAClaimedCommit(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "claimed")
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2))
	two, eight := 2, 8
	old, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &two})
	require.NoError(t, err)
	state, err := s.claim(ctx, old, "commit")
	require.NoError(t, err)
	require.Equal(t, "commit", state)

	seal(t, s, row("c", 3))
	retried, err := s.Prepare(ctx, PrepareParams{AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &eight})
	require.NoError(t, err)
	require.Equal(t, uint64(3), retried.Through)
	ok, err := s.db.bucket.Exists(ctx, old.Staged[0].Path)
	require.NoError(t, err)
	require.True(t, ok, "the retry deleted the staged run of a claimed commit")

	// The old commit lands; the retry's own commit is then stale, and the rows are whole.
	publishOnly(t, s, old)
	_, err = commitOne(ctx, s, retried)
	require.ErrorIs(t, err, ErrStalePreparation)
	_, err = s.Abort(ctx, retried)
	require.NoError(t, err)
	_, err = s.MergeAll(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceAll))
}
