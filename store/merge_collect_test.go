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

// countedStore opens a DB for the instance "w1" on a fresh in-memory bucket whose requests
// counter counts, and creates the generic store name in it.
func countedStore(t *testing.T, name string) (*DB, *Store, *opCounter) {
	t.Helper()
	counter := &opCounter{}
	db := openCountedDB(t, fmt.Sprintf("mem://%s-%d", name, testURLSeq.Add(1)), counter.faults())
	return db, createGeneric(t, db, name, false), counter
}

func stagedExists(t *testing.T, s *Store, p *PreparedMerge) bool {
	t.Helper()
	return onStorage(t, s.db.bucket, p.Staged[0].Path)
}

// A merge terminated between Prepare and commit leaves its staged run under an attempt
// nobody aborts. The next round commit whose watermark reaches into that run's range
// deletes it; a run whose range is still open survives. The collector costs one LIST when
// it finds nothing, and one more LIST (the shard directories) plus a DELETE per run when it
// does.
func TestRoundCommitCollectsAbandonedStagedRuns(t *testing.T) {
	ctx := context.Background()
	db, s, counter := countedStore(t, "collect")
	for i := 1; i <= 4; i++ {
		seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
	}
	want := allRows(t, s, SourceAll)

	// Terminated after its Prepare: generation 1, never committed nor aborted.
	covered := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-a/2", MaxGenerations: intPtr(1)})).must(t)
	require.Equal(t, uint64(1), covered.Through)

	// The next merge prepares generations 1-2 under its own attempt and commits them: the
	// watermark reaches into the abandoned run's range, so the round deletes it.
	next := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-b/2", MaxGenerations: intPtr(2)})).must(t)
	require.Equal(t, uint64(2), next.Through)
	rr := call(s.CommitRound(ctx, []*PreparedMerge{next})).must(t)
	require.Equal(t, RoundCommitted, rr.Shards[0].Outcome)
	require.Equal(t, 1, rr.AbandonedStaged)
	require.False(t, stagedExists(t, s, covered), "the abandoned run of a covered range is deleted")
	require.True(t, stagedExists(t, s, next), "the committed run is live data")
	require.Equal(t, want, allRows(t, s, SourceAll), "collecting the abandoned run lost no row")

	// Nothing left to collect: the cost is one LIST.
	ops := counter.count(func() {
		n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
		require.Zero(t, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1}, ops, "the collector's cost when it finds nothing")

	// Terminated again: generation 3, range open (the watermark is 2). It must survive a
	// collection, which still costs the one LIST.
	open := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-c/2", MaxGenerations: intPtr(1)})).must(t)
	require.Equal(t, uint64(3), open.Through)
	ops = counter.count(func() {
		n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
		require.Zero(t, n)
	})
	require.Equal(t, map[string]int{objstore.OpList: 1}, ops)
	require.True(t, stagedExists(t, s, open), "an open range may still be committed: never collected")

	// Its own commit still publishes it; then a collection deletes nothing.
	require.Equal(t, RoundCommitted, call(commitOne(ctx, s, open)).must(t).Outcome)
	require.True(t, stagedExists(t, s, open))

	// Terminated once more (generation 4), then covered by a commit of the same range under
	// another attempt: the one collection costs a LIST, the shard directories and one DELETE.
	lost := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-d/2", MaxGenerations: intPtr(1)})).must(t)
	won := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-e/2", MaxGenerations: intPtr(1)})).must(t)
	publishOnly(t, s, won)
	ops = counter.count(func() {
		n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
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
	lost = call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-f/2", MaxGenerations: intPtr(1)})).must(t)
	won = call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-g/2", MaxGenerations: intPtr(1)})).must(t)
	publishOnly(t, s, won)
	n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
	require.Zero(t, n)
	require.True(t, stagedExists(t, s, lost))
	require.Equal(t, want, allRows(t, s, SourceAll))
}

// A cancelled merge aborts its prepared pass with the range open: the abort claim stays
// while it still refuses a late commit, and the first round whose watermark covers the range
// deletes it. The claim collector costs one LIST per committed shard when it finds nothing.
func TestRoundCommitCollectsSettledClaims(t *testing.T) {
	ctx := context.Background()
	db, s, counter := countedStore(t, "claims")
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2))

	cancelled := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-a/2", MaxGenerations: intPtr(1)})).must(t)
	require.False(t, call(s.Abort(ctx, cancelled)).must(t).CommitPresent)
	require.True(t, claimExists(t, s, cancelled), "an open range keeps its abort claim")

	next := call(s.Prepare(ctx, PrepareParams{AttemptKey: "merge-wal/x/Prepare/run-b/2", MaxGenerations: intPtr(2)})).must(t)
	rr := call(s.CommitRound(ctx, []*PreparedMerge{next})).must(t)
	require.Equal(t, RoundCommitted, rr.Shards[0].Outcome)
	require.Equal(t, 1, rr.SettledClaims)
	require.False(t, claimExists(t, s, cancelled), "the round that covered the range collected the claim")

	ops := counter.count(func() {
		n := call(s.collectSettledClaims(ctx, []string{db.Shard()})).must(t)
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

// Keys under data/m- and attempts/ that walkeeper did not write are never read as claims of
// another form, never deleted and counted foreign; a look-alike staged run whose tag names no
// shard is left alone too.
func TestCollectorsSkipForeignKeys(t *testing.T) {
	ctx := context.Background()
	db, m, _ := foreignDB(t, fmt.Sprintf("mem://collect-foreign-%d", testURLSeq.Add(1)), "w1")
	s := createGeneric(t, db, "foreign", false)
	seal(t, s, row("a", 1))
	seal(t, s, row("b", 2))
	call(s.MergeAll(ctx)).must(t)

	hex := strings.Repeat("0", 24)
	data := []string{
		dataKey(s.target, "m-x"),
		dataKey(s.target, "m-"+hex+"-"+runIDShardTag(db.Shard())+"-2-1"),
		dataKey(s.target, "m-"+hex+"-"+runIDShardTag(db.Shard())+"-1-99999999999999999999999"),
		dataKey(s.target, "m-/nested/"+hex),
		strings.TrimSuffix(dataKey(s.target, "m-"+hex+"-"+runIDShardTag(db.Shard())+"-1-1"), ".parquet"),
		dataKey(s.target, "m-"+hex[:10]+"/"+hex[11:]+"-"+runIDShardTag(db.Shard())+"-1-1"),
		dataKey(s.target, "m-"+strings.ToUpper("abcdef"+hex[6:])+"-"+runIDShardTag(db.Shard())+"-1-1"),
	}
	lookalike := dataKey(s.target, "m-"+hex+"-zzzzzzzz-1-1") // parses; its tag names no shard
	attempts := claimPrefix(s.target, db.Shard())
	claims := []string{
		attempts + "README.txt",
		attempts + "zz.json",
		attempts + strings.ToUpper("abcdef"+hex[6:]) + ".json",
		attempts + "nested/" + hex + ".json",
		attempts + hex + ".json", // a claim's name, not a claim's body
	}
	putForeign(t, db, append(append(append([]string{}, data...), lookalike), claims...)...)
	require.NoError(t, db.bucket.Put(ctx, attempts+strings.Repeat("1", 24)+".json", []byte(`{"state":"abort"}`)))

	n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
	require.Zero(t, n)
	require.Equal(t, float64(len(data)), foreignCount(m, foreignStaging))
	n = call(s.collectSettledClaims(ctx, []string{db.Shard()})).must(t)
	require.Zero(t, n)
	require.Equal(t, float64(len(claims)+1), foreignCount(m, foreignClaims))
	requireStillThere(t, db, append(append(data, lookalike), claims...)...)
	requireStillThere(t, db, attempts+strings.Repeat("1", 24)+".json")
}

// A bucket full of leftovers costs one round at most collectPerRound deletes per collector;
// the next round goes on with the rest.
func TestCollectorsAreBoundedPerRound(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, fmt.Sprintf("mem://collect-bound-%d", testURLSeq.Add(1)), "bound")
	seal(t, s, row("a", 1))
	call(s.MergeAll(ctx)).must(t)
	shard := db.Shard()
	for i := range collectPerRound + 1 {
		attempt := fmt.Sprintf("gone-%d", i)
		require.NoError(t, db.bucket.Put(ctx, dataKey(s.target, stagedRunID(stagedRunPrefix(attempt, s.target, shard), shard, 1, 1)), []byte("x")))
		claim := &PreparedMerge{AttemptKey: attempt, Shard: shard, Through: 1}
		require.NoError(t, db.bucket.Put(ctx, s.claimKey(claim), []byte(`{"state":"abort","attempt_key":"`+attempt+`","through":1}`)))
	}
	for _, want := range []int{collectPerRound, 1, 0} {
		n := call(s.collectAbandonedStaged(ctx, nil)).must(t)
		require.Equal(t, want, n, "staged runs")
		n = call(s.collectSettledClaims(ctx, []string{shard})).must(t)
		require.Equal(t, want, n, "claims")
	}
}

// A merged run an operator quarantined is in no manifest's runs, and its shard's watermark
// covers its range, but it is not abandoned: the collector must leave it for repair, as
// every clean-up does (docs/FORMAT.md, quarantined).
func TestCollectorKeepsQuarantinedRuns(t *testing.T) {
	ctx := context.Background()
	db, s := newGenericStore(t, newMemURL(), "collectq")
	seal(t, s, row("a", 1))
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 1)
	run := base.Runs[0].Path
	call(s.Quarantine(ctx, run, "operator: bad disk")).must(t)

	seal(t, s, row("b", 2))
	require.NoError(t, errOf(s.MergeAll(ctx))) // a round commit that moves the watermark, and collects
	require.NoError(t, errOf(s.collectAbandonedStaged(ctx, nil)))
	require.True(t, onStorage(t, db.bucket, run), "a quarantined run stays on storage")
}
