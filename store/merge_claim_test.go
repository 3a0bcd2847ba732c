package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// claimKey is the object key of p's attempt claim.
func (s *Store) claimKey(p *PreparedMerge) string {
	return s.attemptClaimKey(p.AttemptKey, p.Shard, p.Through)
}

// claimExists reports whether the attempt's claim object is still in storage.
func claimExists(t *testing.T, s *Store, p *PreparedMerge) bool {
	t.Helper()
	return onStorage(t, s.db.bucket, s.claimKey(p))
}

// Claims are collected as soon as the watermark makes them meaningless, and kept exactly
// while they still stop something: an abort claim below the watermark is what keeps a late
// commit of that attempt from publishing.
func TestAttemptClaimsDoNotAccumulate(t *testing.T) {
	ctx := context.Background()
	_, s := newGenericStore(t, "file://"+t.TempDir(), "claims")

	// A committed attempt leaves no claim, and neither does a late Abort of it.
	seal(t, s, row("a", 1))
	p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/a"})).must(t)
	call(commitOne(ctx, s, p)).must(t)
	require.False(t, claimExists(t, s, p), "commit claim left after a successful commit")
	require.True(t, call(s.Abort(ctx, p)).must(t).CommitPresent)
	require.False(t, claimExists(t, s, p), "abort of a committed attempt left a claim")

	// An abort below the watermark keeps its claim: it is what refuses a late commit.
	seal(t, s, row("b", 2))
	stale := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/b"})).must(t)
	call(s.Abort(ctx, stale)).must(t)
	require.True(t, claimExists(t, s, stale), "an abort below the watermark must keep its claim")
	require.ErrorIs(t, errOf(commitOne(ctx, s, stale)), ErrStalePreparation)

	// Another attempt merges the same generation: the round that moves the watermark past
	// the aborted range collects the claim (collectSettledClaims), and aborting the stale one
	// again leaves none either.
	call(s.MergeAll(ctx)).must(t)
	require.False(t, claimExists(t, s, stale), "the round that covered the aborted range left its claim")
	call(s.Abort(ctx, stale)).must(t)
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
	old := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &two})).must(t)
	state := call(s.claim(ctx, old, "commit")).must(t)
	require.Equal(t, "commit", state)

	seal(t, s, row("c", 3))
	retried := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &eight})).must(t)
	require.Equal(t, uint64(3), retried.Through)
	require.True(t, onStorage(t, s.db.bucket, old.Staged[0].Path), "the retry deleted the staged run of a claimed commit")

	// The old commit lands; the retry's own commit is then stale, and the rows are whole.
	publishOnly(t, s, old)
	require.ErrorIs(t, errOf(commitOne(ctx, s, retried)), ErrStalePreparation)
	call(s.Abort(ctx, retried)).must(t)
	call(s.MergeAll(ctx)).must(t)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceAll))
}

// A retried Prepare (a reset run's, with the old run's attempt key) that finds the old
// run's staged run unreferenced must not delete it while the old run's commit may still
// publish it: neither when that commit claims and publishes between the retry's look at the
// claim and its delete, nor when it publishes and drops its claim between the retry's read
// of the base and its look at the claim. Either way the base named a deleted run.
func TestRetriedPrepareRacingTheOldCommitKeepsLiveRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at reports whether the old commit runs before the retry's operation op on key.
		at func(old *PreparedMerge, s *Store, op, key string) bool
	}{
		{"commit between claim check and delete", func(old *PreparedMerge, _ *Store, op, key string) bool {
			return op == objstore.OpDelete && key == old.Staged[0].Path
		}},
		{"commit and claim drop before claim check", func(old *PreparedMerge, s *Store, op, key string) bool {
			return op != objstore.OpDelete && key == s.claimKey(old)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url := "file://" + t.TempDir()
			db1, s := newGenericStore(t, url, "racing")
			seal(t, s, row("a", 1))
			seal(t, s, row("b", 2))
			two, eight := 2, 8
			old := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &two})).must(t)
			seal(t, s, row("c", 3))

			db2 := openTestDB(t, url, "w2")
			s2 := openGeneric(t, db2, "racing")
			var armed atomic.Bool
			armed.Store(true)
			db2.bucket = db2.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
				if tc.at(old, s2, op, key) && armed.CompareAndSwap(true, false) {
					_, _ = commitOne(ctx, s, old) // the old run's commit, still on another worker
				}
				return nil
			}})
			retried, err := s2.Prepare(ctx, PrepareParams{Shard: old.Shard, AttemptKey: "wf/Prepare/run-1/2", MaxGenerations: &eight})
			if err != nil {
				require.ErrorIs(t, err, ErrConflict, "the old commit merged what the retry planned") // Temporal retries it
				retried = nil
			}
			require.False(t, armed.Load(), "the old commit ran")

			base := call(s.loadBase(ctx)).must(t)
			for _, r := range base.Runs {
				require.True(t, onStorage(t, db1.bucket, r.Path), "the base names run %s, which the retried Prepare deleted", r.Path)
			}
			if retried != nil {
				if _, err := commitOne(ctx, s, retried); err != nil {
					require.ErrorIs(t, err, ErrStalePreparation)
					call(s.Abort(ctx, retried)).must(t)
				}
			}
			call(s.MergeAll(ctx)).must(t)
			require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s, SourceAll))
		})
	}
}

// TestFindingClaimDroppedAfterALostClaimIsNotNotFound: two executions of one attempt run at
// once (a retried CommitRound beside the first, or an Abort beside the commit). One claims,
// publishes, finishes and drops its claim between the other's lost put-if-absent of the
// claim and its read of the winner: that read finds nothing. The attempt is committed, and
// a NotFound there, which Temporal does not retry, failed the shard for good.
func TestFindingClaimDroppedAfterALostClaimIsNotNotFound(t *testing.T) {
	for _, step := range []string{"commit", "abort"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			url := "file://" + t.TempDir()
			_, s := newGenericStore(t, url, "dropped")
			seal(t, s, row("a", 1))
			p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/CommitRound/run-1/3"})).must(t)
			state := call(s.claim(ctx, p, "commit")).must(t) // the first execution has claimed
			require.Equal(t, "commit", state)

			s2 := openGeneric(t, openTestDB(t, url, "w2"), "dropped")
			var armed atomic.Bool
			armed.Store(true)
			s2.db.bucket = s2.db.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == objstore.OpPutIfAbsent && key == s2.claimKey(p) && errors.Is(err, ErrAlreadyExists) && armed.CompareAndSwap(true, false) {
					_, cerr := commitOne(ctx, s, p) // the first execution publishes and drops its claim
					require.NoError(t, cerr)
				}
				return err
			}})
			if step == "commit" {
				res, err := commitOne(ctx, s2, p)
				require.NoError(t, err, "the attempt is committed")
				require.Equal(t, RoundAlreadyCommitted, res.Outcome)
			} else {
				ar, err := s2.Abort(ctx, p)
				require.NoError(t, err, "the attempt is committed")
				require.True(t, ar.CommitPresent)
			}
			require.False(t, armed.Load(), "the first execution ran in between")
			require.False(t, claimExists(t, s, p), "no claim is left")
			require.Equal(t, map[string]int64{"a": 1}, allRows(t, s2, SourceBase))
		})
	}
}

// claim is the claim CommitRound and Abort make for p: state ("commit" or "abort") of p's
// attempt, after the checks they make first.
func (s *Store) claim(ctx context.Context, p *PreparedMerge, state string) (string, error) {
	if err := s.validatePrepared(p); err != nil {
		return "", err
	}
	return s.claimAttempt(ctx, p.AttemptKey, p.Shard, p.Through, state)
}
