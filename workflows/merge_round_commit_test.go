package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// With parallel prepares, the passes of every shard that is ready when a commit starts go
// into one CommitRound: still one commit in flight, far fewer commits than passes, and every
// shard drained with its own watermark. The commit loop does not wait to fill a round: the
// first ready pass commits at once, and what becomes ready while a commit runs is the next
// round, so rounds widen exactly when commits are the bottleneck.
func TestMergeWalRoundCommitsSeveralShardsAtOnce(t *testing.T) {
	env := newEnv(t)
	pending := shardsEach("s%d", 8, 4)
	f := newFakeTable("generic:hot", 2, pending)
	mockTimedTable(env, f, time.Second, 2*time.Second)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", ParallelPrepare: true, PrepareConcurrency: 8})
	res := mergeResult(t, env)

	require.Equal(t, 1, in.max[contract.CommitRoundActivity], "one commit in flight per table")
	require.Equal(t, 32, res.Reclaimed)
	require.Equal(t, 16, res.Passes)
	rounds := f.rounds
	require.Less(t, len(rounds), 16, "fewer commits than passes: %v", rounds)
	widest := 0
	for _, r := range rounds {
		widest = max(widest, len(r))
		seen := map[string]bool{}
		for _, s := range r {
			require.False(t, seen[s], "a shard at most once per round: %v", r)
			seen[s] = true
		}
	}
	require.GreaterOrEqual(t, widest, 7, "the prepares that finish while a commit runs commit together: %v", rounds)
	for _, c := range f.calls(&f.commits) {
		require.Equal(t, contract.TaskQueue, c.queue, "a round commit runs on the shared queue")
	}
	require.EqualValues(t, len(rounds), f.version, "one base version per round")
	for _, sr := range res.Shards {
		require.Equal(t, 4, sr.Reclaimed, sr.Shard)
		require.Equal(t, 2, sr.Passes, sr.Shard)
		require.True(t, sr.Finished, sr.Shard)
		require.Empty(t, sr.Error, sr.Shard)
	}
}

// Serial prepares still ride in shared rounds: the next shard prepares while the previous
// ones' round commit runs, and what is ready meanwhile commits together.
func TestMergeWalSerialPreparesBatchIntoRounds(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:hot", 4, map[string]int{"a": 4, "b": 4, "c": 4, "d": 4, "e": 4})
	mockTimedTable(env, f, time.Second, 3*time.Second)
	in := trackInflight(env)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot"})
	res := mergeResult(t, env)

	require.Equal(t, 1, in.max[contract.PrepareActivity], "serial prepares")
	require.Equal(t, 1, in.max[contract.CommitRoundActivity])
	require.Equal(t, 20, res.Reclaimed)
	require.Less(t, len(f.rounds), 5, "rounds carry several shards: %v", f.rounds)
}

// MaxShardsPerCommit caps a round; the rest wait for the next one. At 1 every round is one
// shard's, still through CommitRound.
func TestMergeWalRoundCommitRespectsTheCap(t *testing.T) {
	for _, c := range []struct{ shards, cap, rounds int }{{5, 2, 3}, {3, 1, 3}} {
		env := newEnv(t)
		pending := shardsEach("s%d", c.shards, 2)
		f := newFakeTable("generic:hot", 2, pending)
		// A commit takes time, so what becomes ready meanwhile waits for the next round.
		mockTimedTable(env, f, time.Second, 2*time.Second)
		in := trackInflight(env)
		env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", ParallelPrepare: true, PrepareConcurrency: c.shards, MaxShardsPerCommit: c.cap})
		require.Equal(t, 2*c.shards, mergeResult(t, env).Reclaimed)
		for _, r := range f.rounds {
			require.LessOrEqual(t, len(r), c.cap, "%v", f.rounds)
		}
		require.Len(t, f.rounds, c.rounds)
		require.Equal(t, 1, in.max[contract.CommitRoundActivity])
	}
}

// By default a round takes up to contract.MaxRoundShards (64) shards.
func TestMergeWalRoundSizeIsMaxRoundShards(t *testing.T) {
	env := newEnv(t)
	// 60 shards of one pass each (fewer than the 100 passes before continue-as-new).
	pending := shardsEach("s%03d", 60, 2)
	f := newFakeTable("generic:hot", 2, pending)
	// The first commit takes long enough for every other shard to prepare meanwhile.
	mockTimedTable(env, f, time.Second, time.Minute)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", ParallelPrepare: true, PrepareConcurrency: 60})
	res := mergeResult(t, env)
	require.Equal(t, 120, res.Reclaimed)
	widest := 0
	for _, r := range f.rounds {
		widest = max(widest, len(r))
	}
	require.Greater(t, widest, 32, "rounds: %d", len(f.rounds))
	require.LessOrEqual(t, widest, contract.MaxRoundShards)
}

// A stale shard in a round is aborted and prepared again, without holding back the shards
// that committed with it.
func TestMergeWalStaleShardInRoundIsAbortedAndPreparedAgain(t *testing.T) {
	env := newEnv(t)
	f := newFakeTable("generic:hot", 2, map[string]int{"a": 2, "b": 2, "c": 2})
	f.staleOnce = map[string]bool{"b": true}
	// A commit takes time, so what becomes ready meanwhile waits for the next round.
	mockTimedTable(env, f, time.Second, 2*time.Second)

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", ParallelPrepare: true, PrepareConcurrency: 3})
	res := mergeResult(t, env)

	// The first ready pass commits at once, the two ready meanwhile share the next round
	// (which shard is first among passes finishing together is up to the test server); b,
	// stale wherever it was, commits alone after its abort and new prepare.
	require.Len(t, f.rounds, 3, "%v", f.rounds)
	require.ElementsMatch(t, []string{"a", "b", "c"}, slices.Concat(f.rounds[0], f.rounds[1]), "%v", f.rounds)
	require.Equal(t, []string{"b"}, f.rounds[2])
	aborts := f.calls(&f.aborts)
	require.Len(t, aborts, 1)
	require.Equal(t, "b", aborts[0].shard)
	require.Equal(t, contract.TaskQueue, aborts[0].queue)
	require.Equal(t, 1, shardResult(t, res, "b").Restarts)
	for _, s := range []string{"a", "b", "c"} {
		sr := shardResult(t, res, s)
		require.Equal(t, 2, sr.Reclaimed, s)
		require.Empty(t, sr.Error, s)
	}
	require.Equal(t, 0, shardResult(t, res, "a").Restarts)
}

// Once a run is hot (its writers seal as fast as it merges), each round commits once: the
// commit loop waits for every pass of the round instead of committing the prepares as they
// finish. Before the run is hot, and in a run that started before the change, they commit as
// they come.
func TestMergeWalHotRoundsCommitOnce(t *testing.T) {
	run := func(version workflow.Version) [][]string {
		env := newEnv(t)
		pending := shardsEach("s%d", 6, 2)
		f := newFakeTable("generic:hot", 2, pending)
		mockTimedTable(env, f, time.Second, time.Second)
		env.OnGetVersion(hotRoundCommitsChange, workflow.DefaultVersion, 1).Return(version)
		// Every shard seals 2 more while each of the first 4 commits runs.
		commits := 0
		env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
			if info.ActivityType.Name != contract.CommitRoundActivity {
				return
			}
			if commits++; commits <= 4 {
				f.mu.Lock()
				for s := range f.pending {
					f.pending[s] += 2
				}
				f.mu.Unlock()
			}
		})
		env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:hot", ParallelPrepare: true, PrepareConcurrency: 2})
		res := mergeResult(t, env)
		require.Equal(t, 6*(2+4*2), res.Reclaimed, "%+v", res)
		return f.rounds
	}

	rounds := run(1)
	hot := slices.IndexFunc(rounds, func(r []string) bool { return len(r) == 6 })
	require.Greater(t, hot, 1, "the first round, not hot yet, commits its prepares as they finish: %v", rounds)
	require.GreaterOrEqual(t, len(rounds)-hot, 3, "%v", rounds)
	for _, r := range rounds[hot:] {
		require.Len(t, r, 6, "every hot round commits once: %v", rounds)
	}

	old := run(workflow.DefaultVersion)
	// How many prepares the old path finds ready at once depends on when the suite's activity
	// goroutines finish, so only the direction is certain: it commits more often.
	require.Greater(t, len(old), len(rounds), "a run that started before the change commits as before: %v", old)
}
