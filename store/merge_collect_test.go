package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// opCounter counts the bucket calls on keys under a store's data/ and shard directories.
type opCounter struct {
	mu sync.Mutex
	on bool
	n  map[string]int
}

func (c *opCounter) faults() objstore.Faults {
	return objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.on {
			c.n[op]++
		}
		return nil
	}}
}

func (c *opCounter) count(f func()) map[string]int {
	c.mu.Lock()
	c.on, c.n = true, map[string]int{}
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	return c.n
}

func stagedExists(t *testing.T, s *Store, p *PreparedMerge) bool {
	t.Helper()
	ok, err := s.db.bucket.Exists(context.Background(), p.Staged[0].Path)
	require.NoError(t, err)
	return ok
}

// A merge terminated between Prepare and commit leaves its staged run under an attempt
// nobody aborts. The next round commit whose watermark reaches into that run's range
// deletes it; a run whose range is still open survives. The collector costs one LIST when
// it finds nothing, and one more LIST (the shard directories) plus a DELETE per run when it
// does.
func TestRoundCommitCollectsAbandonedStagedRuns(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://collect-%d", testURLSeq.Add(1))
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	counter := &opCounter{}
	opts := DefaultOptions()
	opts.InstanceID = "w1"
	db := OpenDBOnBucket(b.WithFaults(counter.faults()), opts)
	t.Cleanup(func() { _ = db.Close(ctx) })
	s := createGeneric(t, db, "collect", false)
	for i := 1; i <= 4; i++ {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
	want := allRows(t, s, SourceAll)

	// Terminated after its Prepare: generation 1, never committed nor aborted.
	covered, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-a/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	require.Equal(t, uint64(1), covered.Through)

	// The next merge prepares generations 1-2 under its own attempt and commits them: the
	// watermark reaches into the abandoned run's range, so the round deletes it.
	next, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-b/2", MaxGenerations: intPtr(2)})
	require.NoError(t, err)
	require.Equal(t, uint64(2), next.Through)
	rr, err := s.CommitRound(ctx, []*PreparedMerge{next})
	require.NoError(t, err)
	require.Equal(t, RoundCommitted, rr.Shards[0].Outcome)
	require.Equal(t, 1, rr.AbandonedStaged)
	require.False(t, stagedExists(t, s, covered), "the abandoned run of a covered range is deleted")
	require.True(t, stagedExists(t, s, next), "the committed run is live data")

	// Nothing left to collect: the cost is one LIST.
	ops := counter.count(func() {
		n, err := s.collectAbandonedStaged(ctx, nil)
		require.NoError(t, err)
		require.Zero(t, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1}, ops, "the collector's cost when it finds nothing")

	// Terminated again: generation 3, range open (the watermark is 2). It must survive a
	// collection, which still costs the one LIST.
	open, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-c/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	require.Equal(t, uint64(3), open.Through)
	ops = counter.count(func() {
		n, err := s.collectAbandonedStaged(ctx, nil)
		require.NoError(t, err)
		require.Zero(t, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1}, ops)
	require.True(t, stagedExists(t, s, open), "an open range may still be committed: never collected")

	// Its own commit still publishes it; then a collection deletes nothing.
	res, err := commitOne(ctx, s, open)
	require.NoError(t, err)
	require.Equal(t, RoundCommitted, res.Outcome)
	require.True(t, stagedExists(t, s, open))

	// Terminated once more (generation 4), then covered by a commit of the same range under
	// another attempt: the one collection costs a LIST, the shard directories and one DELETE.
	lost, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-d/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	won, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-e/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	publishOnly(t, s, won)
	ops = counter.count(func() {
		n, err := s.collectAbandonedStaged(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1, objstore.OpListDirs: 1, objstore.OpDelete: 1}, ops)
	require.False(t, stagedExists(t, s, lost))

	// A second shard whose id starts like this one's makes the tag ambiguous: the run of a
	// covered range is then left for an abort, not guessed at.
	seal(t, s, row("k5", 5))
	want = allRows(t, s, SourceAll)
	twin := db.Shard()[:8] + "-0000-4000-8000-000000000000"
	require.NoError(t, db.bucket.Put(ctx, memWALPrefix(s.target)+twin+"/manifest/x", []byte("{}")))
	lost, err = s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-f/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	won, err = s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-g/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	publishOnly(t, s, won)
	n, err := s.collectAbandonedStaged(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, stagedExists(t, s, lost))
	require.Equal(t, want, allRows(t, s, SourceAll))
}

// A cancelled merge aborts its prepared pass with the range open: the abort claim stays
// while it still refuses a late commit, and the first round whose watermark covers the range
// deletes it. The claim collector costs one LIST per committed shard when it finds nothing.
func TestRoundCommitCollectsSettledClaims(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://claims-%d", testURLSeq.Add(1))
	b, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	counter := &opCounter{}
	opts := DefaultOptions()
	opts.InstanceID = "w1"
	db := OpenDBOnBucket(b.WithFaults(counter.faults()), opts)
	t.Cleanup(func() { _ = db.Close(ctx) })
	s := createGeneric(t, db, "claims", false)
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2))

	cancelled, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-a/2", MaxGenerations: intPtr(1)})
	require.NoError(t, err)
	ar, err := s.Abort(ctx, cancelled)
	require.NoError(t, err)
	require.False(t, ar.CommitPresent)
	require.True(t, claimExists(t, s, cancelled), "an open range keeps its abort claim")

	next, err := s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-b/2", MaxGenerations: intPtr(2)})
	require.NoError(t, err)
	rr, err := s.CommitRound(ctx, []*PreparedMerge{next})
	require.NoError(t, err)
	require.Equal(t, RoundCommitted, rr.Shards[0].Outcome)
	require.Equal(t, 1, rr.SettledClaims)
	require.False(t, claimExists(t, s, cancelled), "the round that covered the range collected the claim")

	ops := counter.count(func() {
		n, err := s.collectSettledClaims(ctx, []string{db.Shard()})
		require.NoError(t, err)
		require.Zero(t, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1}, ops, "the claim collector's cost when it finds nothing")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceBase))
}

// A staged run's tag is only the first 8 characters of its shard id: a run whose tag names
// two shards is left alone, as is a name Prepare never makes.
func TestStagedRunKeysParse(t *testing.T) {
	tg := Target{Kind: KindGeneric, Name: "x"}
	id := stagedRunID(stagedRunPrefix("a", tg, "default"), "default", 3, 9)
	tag, from, through, ok := parseStagedRunKey(tg, dataKey(tg, id))
	require.True(t, ok)
	require.Equal(t, "default", tag)
	require.Equal(t, [2]uint64{3, 9}, [2]uint64{from, through})
	for _, bad := range []string{
		dataKey(tg, "m-abc-default-3-9"),
		dataKey(tg, strings.Replace(id, "-3-9", "-9-3", 1)),
		dataKey(tg, strings.Replace(id, "-3-9", "-0-9", 1)),
		dataKey(tg, "c-"+strings.TrimPrefix(id, "m-")),
		dataKey(Target{Kind: KindGeneric, Name: "y"}, id),
		strings.TrimSuffix(dataKey(tg, id), ".parquet"),
	} {
		_, _, _, ok := parseStagedRunKey(tg, bad)
		require.False(t, ok, bad)
	}
}

func intPtr(n int) *int { return &n }
