package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// The contract mirrors the store's round bounds and outcomes; they must not drift apart.
func TestRoundContractMatchesStore(t *testing.T) {
	require.Equal(t, store.MaxRoundShards, contract.MaxRoundShards)
	require.Equal(t, store.RoundCommitted, contract.RoundCommitted)
	require.Equal(t, store.RoundAlreadyCommitted, contract.RoundAlreadyCommitted)
	require.Equal(t, store.RoundStale, contract.RoundStale)
}

// Three writer shards prepared through the activity, committed in one CommitRound: one base
// version, every shard drained; a stale shard is reported and the others land; a retry
// reports already committed; bad input is a non-retryable InvalidInput.
func TestCommitRoundOverARealStore(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	var dbs []*store.DB
	for _, inst := range []string{"w1", "w2", "w3"} {
		db := openDB(t, url, inst)
		seal(t, db, "generic:round", []string{"a" + inst, "shared"}, []string{"b" + inst})
		dbs = append(dbs, db)
	}
	committer := openDB(t, url, "committer")
	a := &Activities{DB: committer}
	env := newActivityEnv(t, a)
	var prepared []contract.PreparedMerge
	for _, db := range dbs {
		prep := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, contract.PrepareParams{Target: "generic:round", Shard: db.Shard()})
		require.NotNil(t, prep.Prepared)
		prepared = append(prepared, *prep.Prepared)
	}
	// Shard w3 is stale: its attempt was aborted before the round.
	mustRun[contract.AbortResult](t, env, contract.AbortActivity, contract.AbortParams{Prepared: prepared[2]})

	res := mustRun[contract.CommitRoundResult](t, env, contract.CommitRoundActivity,
		contract.CommitRoundParams{Target: "generic:round", Prepared: prepared})
	require.EqualValues(t, 1, res.BaseVersion)
	require.Len(t, res.Shards, 3)
	require.Equal(t, contract.RoundShardResult{Shard: dbs[0].Shard(), Outcome: contract.RoundCommitted, BaseVersion: 1, Reclaimed: 2}, res.Shards[0])
	require.Equal(t, contract.RoundCommitted, res.Shards[1].Outcome)
	require.Equal(t, contract.RoundStale, res.Shards[2].Outcome)
	require.Contains(t, res.Shards[2].Reason, "missing", "the abort deleted its files")

	s, err := committer.Open(ctx, mustTarget(t, "generic:round"))
	require.NoError(t, err)
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.TotalPending(), "only the stale shard's generations are left")

	again := mustRun[contract.CommitRoundResult](t, env, contract.CommitRoundActivity,
		contract.CommitRoundParams{Target: "generic:round", Prepared: prepared[:2]})
	require.Zero(t, again.BaseVersion)
	require.Equal(t, contract.RoundAlreadyCommitted, again.Shards[0].Outcome)

	_, err = run[contract.CommitRoundResult](t, env, contract.CommitRoundActivity,
		contract.CommitRoundParams{Target: "generic:round", Prepared: []contract.PreparedMerge{prepared[0], prepared[0]}})
	requireAppErr(t, err, contract.ErrTypeInvalidInput, true)
}
