package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// commitOne commits p as a round of one and returns its shard's result; a stale shard is
// its ErrStalePreparation, as callers that commit one shard treat it.
func commitOne(ctx context.Context, s *Store, p *PreparedMerge) (RoundShardResult, error) {
	rr, err := s.CommitRound(ctx, []*PreparedMerge{p})
	if len(rr.Shards) == 0 {
		return RoundShardResult{}, err
	}
	if err == nil {
		err = rr.Shards[0].Err()
	}
	return rr.Shards[0], err
}

// publishOnly claims and publishes p without finishing it: the state a crash between a
// commit's publish and its drain leaves.
func publishOnly(t *testing.T, s *Store, p *PreparedMerge) {
	t.Helper()
	res := RoundCommitResult{Shards: []RoundShardResult{{Shard: p.Shard, Through: p.Through}}}
	require.NoError(t, s.publishRound(context.Background(), []*PreparedMerge{p}, &res))
	require.Equal(t, RoundCommitted, res.Shards[0].Outcome)
}

// roundFixture is one table with several writer shards (one DB each, as one process per
// writer) and a committer process of its own, as the shared-queue worker that runs a
// round's CommitRound. The committer's bucket goes through faults when set.
type roundFixture struct {
	url       string
	writers   []*Store
	committer *Store
	faults    atomic.Pointer[objstore.FaultFuncs]
	// want is every row the writers wrote, as read before anything is merged.
	want map[string]int64
}

func newRoundFixture(t *testing.T, url string, shards, gens int) *roundFixture {
	t.Helper()
	f := &roundFixture{url: url, writers: shardStores(t, url, "round", shards)}
	for i, s := range f.writers {
		for g := 0; g < gens; g++ {
			seal(t, s, row(fmt.Sprintf("s%d-g%d", i, g), int64(g)), row("shared", int64(100*i+g)))
		}
	}
	cdb := openTestDB(t, url, "committer")
	cdb.bucket = cdb.bucket.WithFaults(objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			if ff := f.faults.Load(); ff != nil {
				return ff.Before(op, key)
			}
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if ff := f.faults.Load(); ff != nil {
				return ff.After(op, key, err)
			}
			return err
		},
	})
	f.committer = openGeneric(t, cdb, "round")
	f.want = allRows(t, f.writers[0], SourceAll)
	return f
}

// commitAhead has another attempt merge shard i's first generation, so that the watermark
// moves inside what an earlier prepare of that shard covers.
func (f *roundFixture) commitAhead(t *testing.T, i int) {
	t.Helper()
	ctx := context.Background()
	one := 1
	other := call(f.writers[i].Prepare(ctx, PrepareParams{AttemptKey: "other/1", MaxGenerations: &one})).must(t)
	require.NoError(t, errOf(commitOne(ctx, f.writers[i], other)))
}

// commitRoundCut commits ps through f's committer on a context cancelled as the first
// successful operation cut picks ends: a heartbeat's cancellation arriving at that point.
func (f *roundFixture) commitRoundCut(t *testing.T, ps []*PreparedMerge, cut func(op, key string) bool) RoundCommitResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.faults.Store(&objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if err == nil && cut(op, key) {
			cancel()
		}
		return err
	}})
	defer f.faults.Store(nil)
	return call(f.committer.CommitRound(ctx, ps)).must(t)
}

func (f *roundFixture) prepareAll(t *testing.T, attempt string) []*PreparedMerge {
	t.Helper()
	var ps []*PreparedMerge
	for i, s := range f.writers {
		p := call(s.Prepare(context.Background(), PrepareParams{AttemptKey: fmt.Sprintf("%s/%d", attempt, i)})).must(t)
		require.NotNil(t, p)
		ps = append(ps, p)
	}
	return ps
}

// requireConverged checks the end state every round must reach: the rows of f.want, each
// exactly once in the base; nothing pending, no generation file, no staged file outside the
// base and no commit claim left behind.
func (f *roundFixture) requireConverged(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	s := f.writers[0]
	require.Equal(t, f.want, allRows(t, s, SourceAll))
	require.Equal(t, f.want, allRows(t, s, SourceBase))
	base := call(s.loadBase(ctx)).must(t)
	// Each shard's generations 1..watermark are covered by exactly one merged run each: none
	// is folded twice, none skipped.
	covered := map[string][][2]uint64{}
	for _, r := range base.Runs {
		var shard string
		var from, through uint64
		_, err := fmt.Sscanf(strings.ReplaceAll(r.Source, ":", " "), "merge %s %d-%d", &shard, &from, &through)
		require.NoError(t, err, r.Source)
		covered[shard] = append(covered[shard], [2]uint64{from, through})
	}
	for shard, wm := range base.Watermarks {
		rs := covered[shard]
		sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
		next := uint64(1)
		for _, r := range rs {
			require.Equal(t, next, r[0], "shard %s: runs %v", shard, rs)
			next = r[1] + 1
		}
		require.Equal(t, wm, next-1, "shard %s: runs %v", shard, rs)
	}
	for _, w := range f.writers {
		require.Zero(t, pendingOf(t, s, w.db.Shard()))
		require.Empty(t, listedGens(t, s, w.db.Shard()))
		require.Empty(t, genFilesOnDisk(t, s, w.db.Shard()))
	}
	require.Len(t, listKeys(t, s.db.bucket, dataPrefix(s.target)), len(base.Runs), "no staged file left behind")
	claims := call(s.db.bucket.List(ctx, storePrefix(s.target))).must(t)
	for _, o := range claims {
		if !strings.Contains(o.Key, "/attempts/") {
			continue
		}
		// Only abort claims of attempts aborted below the watermark stay: they are what
		// stops a late commit of that attempt (dropClaim).
		raw := getObject(t, s.db.bucket, o.Key)
		var c manifest.AttemptClaim
		require.NoError(t, json.Unmarshal(raw, &c))
		require.Equal(t, "abort", c.State, "no commit claim left behind: %s", o.Key)
	}
}

// requireEveryShard requires every shard of res to have outcome and to be in base version
// baseVersion.
func requireEveryShard(t *testing.T, res RoundCommitResult, outcome string, baseVersion uint64) {
	t.Helper()
	for _, sr := range res.Shards {
		require.Equal(t, outcome, sr.Outcome, "shard %s", sr.Shard)
		require.EqualValues(t, baseVersion, sr.BaseVersion, "shard %s", sr.Shard)
	}
}

func outcomes(res RoundCommitResult) []string {
	var out []string
	for _, sr := range res.Shards {
		out = append(out, sr.Outcome)
	}
	return out
}

// Happy path on every backend: the passes of several shards land in one base version, each
// shard with its own watermark, and every shard is drained.
func TestCommitRoundPublishesSeveralShardsInOneVersion(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newRoundFixture(t, url, 5, 3)
			ps := f.prepareAll(t, "wf/round-1")
			require.NotEmpty(t, listKeys(t, f.committer.db.bucket, demandShardPrefix(f.committer.target, f.writers[0].db.Shard())), "the seals wrote demand records")

			res := call(f.committer.CommitRound(ctx, ps)).must(t)
			require.EqualValues(t, 1, res.BaseVersion, "one base version for the whole round")
			require.Equal(t, []string{"committed", "committed", "committed", "committed", "committed"}, outcomes(res))
			base := call(f.committer.loadBase(ctx)).must(t)
			require.EqualValues(t, 1, base.Version)
			require.Len(t, base.Runs, 5)
			for i, w := range f.writers {
				require.EqualValues(t, 3, base.Watermarks[w.db.Shard()])
				require.Equal(t, 3, res.Shards[i].Reclaimed)
				require.EqualValues(t, 1, res.Shards[i].BaseVersion)
				require.False(t, claimExists(t, f.committer, ps[i]))
				// The seals' demand records are gone with the drain (afterMergeDemand).
				objs := call(f.committer.db.bucket.List(ctx, demandShardPrefix(f.committer.target, w.db.Shard()))).must(t)
				for _, o := range objs {
					r, ok := ParseDemandKey(o.Key)
					require.False(t, ok && !r.Compact && r.Gen <= ps[i].Through, "demand record %s left after the round", o.Key)
				}
			}
			f.requireConverged(t)

			// A retry of the whole round after it finished reports every shard already
			// committed and publishes nothing. It still reports each pass's generations as
			// reclaimed: when the first attempt's reply was lost, the retry's is the only one
			// the workflow sees.
			again := call(f.committer.CommitRound(ctx, ps)).must(t)
			require.Zero(t, again.BaseVersion)
			requireEveryShard(t, again, RoundAlreadyCommitted, 1)
			for i := range again.Shards {
				require.Equal(t, 3, again.Shards[i].Reclaimed, "shard %d", i)
			}
			f.requireConverged(t)
		})
	}
}

// A stale shard among several is left out without blocking the others, and its Abort
// (the workflow's compensation) deletes exactly its staged files.
func TestCommitRoundLeavesStaleShardsOut(t *testing.T) {
	ctx := context.Background()
	f := newRoundFixture(t, fmt.Sprintf("mem://round-stale-%d", testURLSeq.Add(1)), 4, 3)
	ps := f.prepareAll(t, "wf/round-1")

	// Shard 1: another attempt merged its first generation meanwhile, so the watermark is
	// inside the prepared range. Shard 2: its attempt was aborted first. Shard 3: its staged
	// file is gone.
	f.commitAhead(t, 1)
	require.NoError(t, errOf(f.writers[2].claim(ctx, ps[2], "abort")))
	require.NoError(t, f.writers[3].db.bucket.Delete(ctx, ps[3].Staged[0].Path))

	res := call(f.committer.CommitRound(ctx, ps)).must(t)
	require.Equal(t, []string{"committed", "stale", "stale", "stale"}, outcomes(res))
	require.Contains(t, res.Shards[1].Reason, "watermark 1 inside prepared range 1..3")
	require.Contains(t, res.Shards[2].Reason, "was aborted")
	require.Contains(t, res.Shards[3].Reason, "is missing")
	base := call(f.committer.loadBase(ctx)).must(t)
	require.EqualValues(t, 3, base.Watermarks[f.writers[0].db.Shard()])
	require.EqualValues(t, 1, base.Watermarks[f.writers[1].db.Shard()])
	require.Zero(t, base.Watermarks[f.writers[2].db.Shard()])
	require.Equal(t, f.want, allRows(t, f.writers[0], SourceAll), "nothing lost while the stale shards wait")

	// Compensation: each stale attempt's Abort proves its commit absent and deletes its
	// files; the shards then merge again.
	for _, i := range []int{1, 2, 3} {
		ar, err := f.writers[i].Abort(ctx, ps[i])
		require.NoError(t, err, "shard %d", i)
		require.False(t, ar.CommitPresent)
	}
	call(f.writers[0].MergeAll(ctx)).must(t)
	f.requireConverged(t)
}

// Crash points of a round, injected with the fault decorator on the committer's bucket: the
// reads right after the crash are whole, and a retry of the same round converges.
func TestCommitRoundCrashPoints(t *testing.T) {
	injected := errors.New("injected crash")
	isBase := func(key string) bool { return strings.Contains(key, "/_versions/") }
	isShardManifest := func(key string) bool { return strings.Contains(key, "/manifest/") }
	cases := []struct {
		name string
		// faults returns the hooks for one round; shards are the writers' shard ids.
		faults func(shards []string) objstore.FaultFuncs
		// published: the crashed call's base version is durable.
		published bool
	}{
		{"before-publish", func([]string) objstore.FaultFuncs {
			return failOn(injected, func(op, key string) bool { return op == objstore.OpPutIfAbsent && isBase(key) })
		}, false},
		{"publish-landed-reply-lost", func([]string) objstore.FaultFuncs {
			return objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == objstore.OpPutIfAbsent && isBase(key) && err == nil {
					return injected
				}
				return err
			}}
		}, true},
		{"after-publish-before-drains", func([]string) objstore.FaultFuncs {
			return failOn(injected, func(op, key string) bool { return op == objstore.OpPutIfAbsent && isShardManifest(key) })
		}, true},
		{"between-drains", func(shards []string) objstore.FaultFuncs {
			// Only the second shard's drain fails: the others are drained.
			return failOn(injected, func(op, key string) bool {
				return op == objstore.OpPutIfAbsent && isShardManifest(key) && strings.Contains(key, "/"+shards[1]+"/")
			})
		}, true},
		{"during-claim-clean-up", func([]string) objstore.FaultFuncs {
			return failOn(injected, func(op, key string) bool { return op == objstore.OpDelete && strings.Contains(key, "/attempts/") })
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newRoundFixture(t, fmt.Sprintf("mem://round-crash-%d", testURLSeq.Add(1)), 3, 2)
			ps := f.prepareAll(t, "wf/round-1")
			var shards []string
			for _, w := range f.writers {
				shards = append(shards, w.db.Shard())
			}
			ff := tc.faults(shards)
			f.faults.Store(&ff)
			require.ErrorIs(t, errOf(f.committer.CommitRound(ctx, ps)), injected)
			f.faults.Store(nil)

			base := call(f.writers[0].loadBase(ctx)).must(t)
			if tc.published {
				require.EqualValues(t, 1, base.Version)
			} else {
				require.Zero(t, base.Version)
			}
			require.Equal(t, f.want, allRows(t, f.writers[0], SourceAll), "reads right after the crash")

			// The activity's retry: same input.
			res := call(f.committer.CommitRound(ctx, ps)).must(t)
			outcome := RoundCommitted
			if tc.published {
				outcome = RoundAlreadyCommitted
			}
			requireEveryShard(t, res, outcome, 1)
			f.requireConverged(t)
		})
	}
}

// A stale shard's compensation can crash too: the retried Abort finishes the job.
func TestCommitRoundCompensationCrash(t *testing.T) {
	ctx := context.Background()
	f := newRoundFixture(t, fmt.Sprintf("mem://round-comp-%d", testURLSeq.Add(1)), 2, 2)
	ps := f.prepareAll(t, "wf/round-1")
	f.commitAhead(t, 1)

	require.Equal(t, []string{"committed", "stale"}, outcomes(call(f.committer.CommitRound(ctx, ps)).must(t)))

	injected := errors.New("injected crash")
	ff := failOn(injected, func(op, key string) bool {
		return op == objstore.OpDelete && strings.HasSuffix(key, ".parquet")
	})
	f.faults.Store(&ff)
	require.ErrorIs(t, errOf(f.committer.Abort(ctx, ps[1])), injected)
	f.faults.Store(nil)
	// The round that committed its range ahead already collected the staged run
	// (collectAbandonedStaged): no commit of it could publish it. The Abort still settles
	// the attempt.
	require.False(t, onStorage(t, f.committer.db.bucket, ps[1].Staged[0].Path), "collected by the round that covered its range")
	require.Equal(t, f.want, allRows(t, f.writers[0], SourceAll))

	require.Equal(t, 1, call(f.committer.Abort(ctx, ps[1])).must(t).Deleted)
	call(f.writers[0].MergeAll(ctx)).must(t)
	f.requireConverged(t)
}

func TestCommitRoundRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	f := newRoundFixture(t, fmt.Sprintf("mem://round-bad-%d", testURLSeq.Add(1)), 2, 1)
	ps := f.prepareAll(t, "wf/round-1")
	require.ErrorIs(t, errOf(f.committer.CommitRound(ctx, nil)), ErrInvalidInput)
	require.ErrorIs(t, errOf(f.committer.CommitRound(ctx, []*PreparedMerge{ps[0], ps[0]})), ErrInvalidInput)
	tooMany := make([]*PreparedMerge, MaxRoundShards+1)
	for i := range tooMany {
		tooMany[i] = ps[0]
	}
	require.ErrorIs(t, errOf(f.committer.CommitRound(ctx, tooMany)), ErrInvalidInput)
	bad := *ps[1]
	bad.Staged = []StagedFile{{Path: "elsewhere/x.parquet"}}
	require.ErrorIs(t, errOf(f.committer.CommitRound(ctx, []*PreparedMerge{ps[0], &bad})), ErrInvalidInput)
	require.Zero(t, call(f.committer.loadBase(ctx)).must(t).Version, "bad input writes nothing")
	require.False(t, claimExists(t, f.committer, ps[0]))
}

// TestRoundInputSize pins the bounds MaxRoundShards rests on: a typical PreparedMerge of 64
// generations (the shape of a recorded CommitRound input: a UUID shard, short keys) is
// under 1 KiB of JSON, so a full round of them fits the workflow's 64 KiB round cap
// (contract.MaxRoundBytes); a worst-case one (long staged path, 256-byte keys) is about
// 2.1 KiB, so that cap closes a round of them at ~30, and even a full round of them stays
// far below the 256 KiB payload budget.
func TestRoundInputSize(t *testing.T) {
	const maxRoundBytes = 64 << 10 // contract.MaxRoundBytes (store does not import contract)
	marshalRound := func(p PreparedMerge) (one, all int) {
		raw := call(json.Marshal(p)).must(t)
		round := make([]PreparedMerge, MaxRoundShards)
		for i := range round {
			round[i] = p
		}
		rawAll := call(json.Marshal(round)).must(t)
		return len(raw), len(rawAll)
	}

	gens := make([]uint64, 64)
	for i := range gens {
		gens[i] = 10_000 + uint64(i)
	}
	typical := PreparedMerge{
		Target: "generic:hot", Shard: "2f90d4b5-0361-5700-a264-7f3fb3ca947e",
		Generations: gens, Through: gens[63],
		Staged: []StagedFile{{
			Path: "generic/hot/data/m-149c897f083bb3287725a484-2f90d4b5-10000-10063.parquet", Rows: 64, Bytes: 9_000,
			MinKey: "k000000", MaxKey: "k999999", MinSeq: 1796122116141868182, MaxSeq: 1796122116141869155, Checksum: "f040933d",
		}},
		WriterEpoch: 1, AttemptKey: "merge-wal/generic/hot/Prepare/01a23138-8034-7ca1-a927-ea9ed04a8cc4/12",
		BaseVersion: 1200, Bytes: 9_000, Rows: 64, InputRows: 64,
	}
	one, all := marshalRound(typical)
	t.Logf("typical PreparedMerge of 64 generations: %d bytes of JSON; %d of them: %d bytes", one, MaxRoundShards, all)
	require.Less(t, one, 1<<10)
	require.Less(t, all, maxRoundBytes, "a full round of typical passes fits the round cap")

	for i := range gens {
		gens[i] = 1_000_000_000 + uint64(i)
	}
	key := strings.Repeat("k", 256)
	worst := PreparedMerge{
		Target: "generic:" + strings.Repeat("n", 100), Shard: strings.Repeat("s", 64),
		Generations: gens, Through: gens[63],
		Staged: []StagedFile{{
			Path: strings.Repeat("p", 200) + ".parquet", Rows: 1 << 40, Bytes: 1 << 40,
			MinKey: key, MaxKey: key, MinSeq: 1 << 60, MaxSeq: 1 << 60, Checksum: "deadbeef",
		}},
		WriterEpoch: 1 << 40, AttemptKey: strings.Repeat("a", 160), BaseVersion: 1 << 40,
		Bytes: 1 << 40, Rows: 1 << 40, InputRows: 1 << 40,
	}
	one, all = marshalRound(worst)
	t.Logf("worst-case PreparedMerge: %d bytes of JSON; %d of them: %d bytes", one, MaxRoundShards, all)
	require.Less(t, one, 3<<10)
	require.Greater(t, maxRoundBytes/one, 24, "the round cap still takes a couple of dozen worst-case passes")
	require.Less(t, all, 160<<10, "a full round's input, even uncapped, under the 256 KiB budget")
}

// A round commit whose context ends right after its base version landed (its MergeWal
// terminated or cancelled: the activity learns it at a heartbeat) finished nothing: the
// drains, the generation and demand deletes and the claim drops all ran on that context, and
// since a stopped workflow retries nothing, they waited for the shards' next Prepare. The
// finish of a landed publish runs on a context of its own.
func TestFindingRoundCommitCutAfterItsPublishStillFinishes(t *testing.T) {
	f := newRoundFixture(t, newMemURL(), 2, 2)
	ps := f.prepareAll(t, "merge-wal/generic/round/CommitRound/run")
	res := f.commitRoundCut(t, ps, func(op, key string) bool { // as the version lands
		return op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/")
	})
	require.NotZero(t, res.BaseVersion)
	for _, p := range ps {
		require.Empty(t, listedGens(t, f.committer, p.Shard), "shard %s is drained", p.Shard)
		require.Empty(t, genFilesOnDisk(t, f.committer, p.Shard), "shard %s's merged generations are deleted", p.Shard)
		require.Empty(t, listKeys(t, f.committer.db.bucket, claimPrefix(f.committer.target, p.Shard)), "shard %s's claim is dropped", p.Shard)
	}
	require.Equal(t, f.want, allRows(t, f.writers[0], SourceAll))
}

// A round commit whose context ends right after it claimed its attempts "commit" (its MergeWal
// cancelled or terminated: the activity learns it at a heartbeat) published nothing and left
// the claims, which only its own retry could carry through: the cancelled run's Abort of each
// pass was refused ("has started committing") on each of its 10 attempts, the cancel took
// minutes, and the shard was recorded failed. Once claimed, the publish is carried through on a
// context of its own, so the Abort finds the commit present.
func TestFindingRoundCommitCutAfterItsClaimsStillPublishes(t *testing.T) {
	ctx := context.Background()
	f := newRoundFixture(t, newMemURL(), 2, 2)
	ps := f.prepareAll(t, "merge-wal/generic/round/CommitRound/run")
	var claimed atomic.Int32
	res := f.commitRoundCut(t, ps, func(op, key string) bool { // as the last claim lands
		return op == objstore.OpPutIfAbsent && strings.Contains(key, "/attempts/") && claimed.Add(1) == int32(len(ps))
	})
	requireEveryShard(t, res, RoundCommitted, res.BaseVersion)
	for _, p := range ps {
		ab, err := f.committer.Abort(ctx, p)
		require.NoError(t, err, "the cancelled run's Abort of shard %s", p.Shard)
		require.True(t, ab.CommitPresent)
		require.Empty(t, listedGens(t, f.committer, p.Shard))
	}
	require.Equal(t, f.want, allRows(t, f.writers[0], SourceAll))
}
