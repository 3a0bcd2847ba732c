package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
)

func TestPrepareCommitAbortOverARealStore(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memURL(t), "w1")
	s := seal(t, db, "generic:gs", []string{"a", "b"}, []string{"b", "c"}, []string{"c", "d"})
	a := &Activities{DB: db}
	env := newActivityEnv(t, a)
	var beats []contract.PrepareProgress
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		if info.ActivityType.Name != contract.PrepareActivity || !details.HasValues() {
			return
		}
		var p contract.PrepareProgress
		require.NoError(t, details.Get(&p))
		beats = append(beats, p)
	})

	listed := mustRun[contract.ListPendingShardsResult](t, env, contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic:gs"})
	require.Equal(t, []contract.ShardPending{{Shard: db.Shard(), Pending: 3, PendingBytes: listed.Shards[0].PendingBytes,
		OldestPending: listed.Shards[0].OldestPending}}, listed.Shards)

	prep := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, contract.PrepareParams{Target: "generic:gs", Shard: db.Shard()})
	require.NotNil(t, prep.Prepared)
	p := *prep.Prepared
	require.Len(t, p.Generations, 3)
	require.True(t, strings.HasPrefix(p.AttemptKey, "default-test-workflow-id/"), p.AttemptKey)
	require.Equal(t, int64(4), p.Rows, "newest row per key")
	// Progress goes out on the reporter's heartbeat tick (TestReporterHeartbeatsProgressOnItsTick):
	// a Prepare shorter than a tick sends no heartbeat, each of which is a billed action.
	for _, b := range beats {
		require.Equal(t, contract.ActivityStateRunning, b.State)
		require.Equal(t, 3, b.Total)
	}

	cr := commitOne(t, env, p)
	require.Equal(t, 3, cr.Reclaimed)
	require.Equal(t, contract.RoundCommitted, cr.Outcome)
	row, err := s.Get(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(2), row["n"], "the newest version won")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.TotalPending())

	again := commitOne(t, env, p)
	require.Equal(t, contract.RoundAlreadyCommitted, again.Outcome, "committing twice is safe")

	ab := mustRun[contract.AbortResult](t, env, contract.AbortActivity, contract.AbortParams{Prepared: p})
	require.True(t, ab.CommitPresent, "abort never deletes a committed run")
	require.False(t, ab.CommittedByAnother, "its own run holds the pass")
	require.Zero(t, ab.Deleted)

	empty := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, contract.PrepareParams{Target: "generic:gs", Shard: db.Shard()})
	require.Nil(t, empty.Prepared, "nothing pending")
}

// The Abort of an attempt whose range another attempt's run published says so, for the
// workflow not to count that pass a second time (decision 0781).
func TestAbortOfARacingLoserSaysAnotherAttemptCommitted(t *testing.T) {
	db := openDB(t, memURL(t), "w1")
	seal(t, db, "generic:gs", []string{"a"}, []string{"b"})
	env := newActivityEnv(t, &Activities{DB: db})
	params := contract.PrepareParams{Target: "generic:gs", Shard: db.Shard()}
	winner := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, params).Prepared
	loser := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, params).Prepared
	require.NotEqual(t, winner.AttemptKey, loser.AttemptKey)
	require.Equal(t, contract.RoundCommitted, commitOne(t, env, *winner).Outcome)

	ab := mustRun[contract.AbortResult](t, env, contract.AbortActivity, contract.AbortParams{Prepared: *loser})
	require.True(t, ab.CommitPresent)
	require.True(t, ab.CommittedByAnother)
	require.Equal(t, len(loser.Staged), ab.Deleted, "the loser's staged run is garbage")
}

func TestStalePreparationIsAbortedAndPreparedAgain(t *testing.T) {
	db := openDB(t, memURL(t), "w1")
	seal(t, db, "generic:gs", []string{"a"}, []string{"b"}, []string{"c"})
	env := newActivityEnv(t, &Activities{DB: db})
	params := contract.PrepareParams{Target: "generic:gs", Shard: db.Shard()}

	wide := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, params).Prepared
	one := 1
	narrow := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity,
		contract.PrepareParams{Target: "generic:gs", Shard: db.Shard(), MaxGenerations: &one}).Prepared
	require.Len(t, wide.Generations, 3)
	require.Len(t, narrow.Generations, 1)
	commitOne(t, env, *narrow)

	require.Equal(t, contract.RoundStale, commitOne(t, env, *wide).Outcome)

	ab := mustRun[contract.AbortResult](t, env, contract.AbortActivity, contract.AbortParams{Prepared: *wide})
	require.False(t, ab.CommitPresent)
	require.Equal(t, len(wide.Staged), ab.Deleted, "exactly the attempt's staged files are deleted")

	rest := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity, params).Prepared
	require.Len(t, rest.Generations, 2)
	require.Equal(t, 2, commitOne(t, env, *rest).Reclaimed)
}

func TestActivityErrorsAreTyped(t *testing.T) {
	db := openDB(t, memURL(t), "w1")
	env := newActivityEnv(t, &Activities{DB: db})

	_, err := run[contract.PrepareResult](t, env, contract.PrepareActivity, contract.PrepareParams{Target: "generic:missing", Shard: db.Shard()})
	requireAppErr(t, err, contract.ErrTypeStoreNotFound, true)
	require.Contains(t, err.Error(), "store generic:missing does not exist; create it with: curl -XPOST http://<worker>/api/v1/stores/generic/missing")
	require.NotContains(t, err.Error(), "_registry", "the storage layer's chain stays out of the message")
	_, err = run[contract.ListPendingShardsResult](t, env, contract.ListPendingShardsActivity, contract.ListPendingShardsParams{Target: "generic/gs"})
	requireAppErr(t, err, contract.ErrTypeInvalidInput, true)
	_, err = run[contract.CommitRoundResult](t, env, contract.CommitRoundActivity,
		contract.CommitRoundParams{Target: "nope", Prepared: []contract.PreparedMerge{{Target: "nope"}}})
	requireAppErr(t, err, contract.ErrTypeInvalidInput, true)

	bare := newActivityEnv(t, &Activities{})
	_, err = run[contract.PrepareResult](t, bare, contract.PrepareActivity, contract.PrepareParams{Target: "generic:gs"})
	requireAppErr(t, err, contract.ErrTypeMisconfigured, true)
	_, err = run[contract.StartWorkflowsResult](t, bare, contract.StartWorkflowsActivity, contract.StartWorkflowsParams{})
	requireAppErr(t, err, contract.ErrTypeMisconfigured, true)
}

func TestCompactBaseActivity(t *testing.T) {
	db := openDB(t, memURL(t), "w1")
	seal(t, db, "generic:gs", []string{"a"}, []string{"b"}, []string{"a"}, []string{"c"})
	env := newActivityEnv(t, &Activities{DB: db})
	one := 1
	for i := 0; i < 4; i++ { // one run per merge pass
		p := mustRun[contract.PrepareResult](t, env, contract.PrepareActivity,
			contract.PrepareParams{Target: "generic:gs", Shard: db.Shard(), MaxGenerations: &one}).Prepared
		commitOne(t, env, *p)
	}
	res := mustRun[contract.CompactPassResult](t, env, contract.CompactBaseActivity, contract.CompactPassParams{Target: "generic:gs"})
	require.True(t, res.Committed)
	require.Equal(t, 4, res.InputRuns)
	require.Equal(t, 1, res.RunsLeft)
	require.Equal(t, int64(4), res.RowsIn)
	require.Equal(t, int64(3), res.RowsOut, "shadowed rows dropped")
}
