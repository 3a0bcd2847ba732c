package reliability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// TestCorruptObjectsAreQuarantined damages one object of each kind on a real root with three
// stores of three shards each (one process handle per shard, serving all three stores, like
// a worker) and checks that the damage stays where it is:
//
//   - store cor-a: the first pending generation of shard 0 is truncated. Prepare of that shard
//     fails with ErrCorrupt naming the generation's key; the other shards merge to pending 0;
//     Gets outside the damaged generation's key range still answer with the newest value, Gets
//     inside it fail with ErrCorrupt (never a stale value or a 404); the generation stays
//     listed and on storage.
//   - store cor-b: the base run that merged shard 1's first round is garbled. Every shard still
//     merges to pending 0 (merges do not read the base); CompactBase fails with ErrCorrupt
//     naming the run and publishes nothing; reads in the run's key range fail with ErrCorrupt,
//     every other key reads its newest value; the run stays referenced and on storage.
//   - store cor-c: the WAL object holding shard 2's last, unsealed append is truncated. The
//     restarted owner of shard 2 cannot append (its writer's WAL replay fails with ErrCorrupt
//     naming the WAL position); the other shards keep appending; every shard's sealed
//     generations, shard 2's included, merge to pending 0; the WAL object stays.
//
// walkeeper_corrupt_objects_total must grow for the generation and the run. The stores are
// checked against an oracle; the only rows that are not readable are the ones in the damaged
// objects, and nothing the damage did not touch is lost.
func TestCorruptObjectsAreQuarantined(t *testing.T) {
	for _, backend := range []string{"mem", "file"} {
		t.Run(backend, func(t *testing.T) {
			url := memURL(t)
			if backend == "file" {
				url = fileURL(t)
			}
			runCorrupt(t, url)
		})
	}
}

const corruptShards = 3

type corruptStore struct {
	name   string
	t      store.Target
	oracle *Oracle
	byProc []*store.Store // one handle per shard process
}

func corruptCounter(t testing.TB, m *store.Metrics) float64 {
	t.Helper()
	var d dto.Metric
	require.NoError(t, m.CorruptObjects.WithLabelValues(string(store.KindGeneric)).Write(&d))
	return d.GetCounter().GetValue()
}

func openTarget(ctx context.Context, t testing.TB, db *store.DB, tg store.Target, create bool) *store.Store {
	t.Helper()
	var s *store.Store
	var err error
	if create {
		s, err = db.Create(ctx, tg, store.CreateOptions{Schema: &Schema})
	} else {
		s, err = db.Open(ctx, tg)
	}
	if err != nil {
		t.Fatalf("open %s: %v", tg, err)
	}
	return s
}

func (cs *corruptStore) write(ctx context.Context, t testing.TB, shard int, keys []string, v int64) {
	t.Helper()
	rows := make([]store.Row, len(keys))
	for i, k := range keys {
		cs.oracle.Attempt(k, v)
		rows[i] = Row(k, v)
	}
	require.NoError(t, errOf(cs.byProc[shard].Append(ctx, rows)), "%s shard %d append", cs.name, shard)
	for _, k := range keys {
		cs.oracle.Ack(k, v)
	}
}

func (cs *corruptStore) seal(ctx context.Context, t testing.TB, shard int) {
	t.Helper()
	require.NoError(t, errOf(cs.byProc[shard].Flush(ctx)), "%s shard %d flush", cs.name, shard)
}

func keyRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%sk%03d", prefix, i))
	}
	return out
}

// mergeShard merges one shard pass by pass until it has nothing pending (or an error).
func mergeShard(ctx context.Context, s *store.Store, shard string) (int, error) {
	total := 0
	for pass := 0; pass < 100; pass++ {
		res, err := s.MergeOnce(ctx, shard)
		if err != nil {
			return total, err
		}
		if res.Reclaimed == 0 {
			return total, nil
		}
		total += res.Reclaimed
	}
	return total, fmt.Errorf("shard %s: still merging after 100 passes", shard)
}

// drainShards merges every shard of s (what a store of the test is called, for the errors)
// and requires nothing pending afterwards.
func drainShards(ctx context.Context, t testing.TB, s *store.Store, shards []string, what string) {
	t.Helper()
	for _, sh := range shards {
		assert.NoError(t, errOf(mergeShard(ctx, s, sh)), "%s shard %s", what, sh)
	}
	for sh, n := range pendingOf(ctx, t, s) {
		assert.Zero(t, n, "%s shard %s: pending after merging", what, sh)
	}
}

func pendingOf(ctx context.Context, t testing.TB, s *store.Store) map[string]int {
	t.Helper()
	st, err := s.Stats(ctx)
	require.NoError(t, err, "stats %s", s.Target())
	out := map[string]int{}
	for _, sh := range st.Shards {
		out[sh.Shard] = sh.PendingGenerations
	}
	return out
}

// checkGets reads every key the oracle knows through s: a key inside [damagedMin, damagedMax]
// may fail with ErrCorrupt naming damagedKey (and must, if mustFail says so); every other key
// must read its newest acknowledged value.
func checkGets(ctx context.Context, t testing.TB, s *store.Store, o *Oracle, damagedKey, damagedMin, damagedMax string) (ok, corrupt int) {
	t.Helper()
	for _, k := range o.Keys() {
		row, err := s.Get(ctx, k)
		inside := damagedKey != "" && k >= damagedMin && k <= damagedMax
		switch {
		case err == nil:
			v, verr := ValueOf(row)
			if verr != nil {
				t.Errorf("%s: %v", k, verr)
				continue
			}
			assert.NoError(t, o.Allowed(k, v, true), "%s", s.Target())
			ok++
		case inside && errors.Is(err, store.ErrCorrupt):
			assert.ErrorContains(t, err, damagedKey, "Get %s: the corrupt error names the damaged object", k)
			corrupt++
		default:
			t.Errorf("Get %s of %s (damaged range %q..%q): %v", k, s.Target(), damagedMin, damagedMax, err)
		}
	}
	return ok, corrupt
}

func mustBytes(ctx context.Context, t testing.TB, b *objstore.Bucket, key string, want []byte) {
	t.Helper()
	got, err := b.Get(ctx, key)
	if err != nil {
		t.Errorf("damaged object %s is gone (must be kept for diagnosis and repair): %v", key, err)
		return
	}
	if string(got) != string(want) {
		t.Errorf("damaged object %s was rewritten (%d bytes, want the %d damaged bytes)", key, len(got), len(want))
	}
}

func runCorrupt(t *testing.T, url string) {
	ctx := context.Background()
	met := store.NewMetrics(prometheus.NewRegistry(), nil)
	tweak := func(o *store.Options) {
		o.Metrics = met
		o.PendingMax = 0
		o.PendingWarn = 0
		o.MergeMaxGenerations = 1 // one generation per pass: a damaged one is the next in line
	}
	procs := make([]*store.DB, corruptShards)
	shardIDs := make([]string, corruptShards)
	for i := range procs {
		procs[i] = mustOpenDB(t, url, fmt.Sprintf("cor-w%d", i), nil, tweak)
		shardIDs[i] = procs[i].Shard()
	}
	stores := map[string]*corruptStore{}
	for _, name := range []string{"a", "b", "c"} {
		cs := &corruptStore{name: name, t: store.Target{Kind: store.KindGeneric, Name: "cor-" + name}, oracle: NewOracle()}
		for i, db := range procs {
			cs.byProc = append(cs.byProc, openTarget(ctx, t, db, cs.t, i == 0))
		}
		stores[name] = cs
	}
	// Shard i of store x writes only keys "x<i>-k…", so the damaged objects have known,
	// disjoint key ranges.
	prefix := func(name string, i int) string { return fmt.Sprintf("%s%d-", name, i) }
	for _, cs := range stores {
		for i := 0; i < corruptShards; i++ {
			cs.write(ctx, t, i, keyRange(prefix(cs.name, i), 0, 20), 1)
			cs.seal(ctx, t, i)
		}
		require.NoError(t, errOf(cs.byProc[0].MergeAll(ctx)), "round-1 merge of %s", cs.name)
		// Round 2: two more generations per shard, both pending.
		for i := 0; i < corruptShards; i++ {
			cs.write(ctx, t, i, keyRange(prefix(cs.name, i), 10, 30), 2)
			cs.seal(ctx, t, i)
			cs.write(ctx, t, i, keyRange(prefix(cs.name, i), 0, 5), 3)
			cs.seal(ctx, t, i)
		}
	}
	// Store c, shard 2: one more append, acknowledged but not sealed (only in the WAL).
	walOnly := keyRange("c2-w", 0, 10)
	{
		rows := make([]store.Row, len(walOnly))
		for i, k := range walOnly {
			rows[i] = Row(k, 1)
		}
		require.NoError(t, errOf(stores["c"].byProc[2].Append(ctx, rows)))
	}

	bucket := procs[0].Bucket()
	layout := func(cs *corruptStore) *Layout {
		t.Helper()
		l, err := InspectLayout(ctx, bucket, cs.t)
		require.NoError(t, err)
		return l
	}

	// Damage 1: truncate store a, shard 0's first pending generation.
	la := layout(stores["a"])
	sa0 := la.Shards[shardIDs[0]]
	if sa0 == nil || len(sa0.ListedMeta) != 2 {
		t.Fatalf("store a shard 0: want 2 pending generations, layout %s", la.Summary())
	}
	badGen := sa0.ListedMeta[0]
	genBytes, err := bucket.Get(ctx, badGen.Path)
	require.NoError(t, err)
	genBytes = genBytes[:len(genBytes)/2]
	require.NoError(t, bucket.Put(ctx, badGen.Path, genBytes))

	// Damage 2: garble the base run of store b that holds shard 1's first round.
	lb := layout(stores["b"])
	var badRun RunInfo
	for _, r := range lb.RunMeta {
		if strings.HasPrefix(r.MinKey, prefix("b", 1)) {
			badRun = r
		}
	}
	if badRun.Path == "" {
		t.Fatalf("store b: no run of shard 1 in %+v", lb.RunMeta)
	}
	runBytes, err := bucket.Get(ctx, badRun.Path)
	require.NoError(t, err)
	for i := 8; i < len(runBytes)-8; i += 7 {
		runBytes[i] ^= 0x5a
	}
	require.NoError(t, bucket.Put(ctx, badRun.Path, runBytes))
	baseVersionB := lb.BaseVersion

	// Damage 3: truncate the WAL object holding store c, shard 2's unsealed append.
	lc := layout(stores["c"])
	sc2 := lc.Shards[shardIDs[2]]
	var badWAL string
	for _, w := range sc2.WAL {
		if !slices.Contains(sc2.StaleWAL, w) && w > badWAL {
			badWAL = w
		}
	}
	if badWAL == "" {
		t.Fatalf("store c shard 2: no live WAL object: %+v", sc2)
	}
	walBytes, err := bucket.Get(ctx, badWAL)
	require.NoError(t, err)
	walBytes = walBytes[:len(walBytes)*2/3]
	require.NoError(t, bucket.Put(ctx, badWAL, walBytes))
	t.Logf("damaged: generation %s (truncated, keys %s..%s), run %s (garbled, keys %s..%s), WAL %s (truncated, %d rows)",
		badGen.Path, badGen.MinKey, badGen.MaxKey, badRun.Path, badRun.MinKey, badRun.MaxKey, badWAL, len(walOnly))

	// A fresh process (no cache) does the merging and the reads from here on.
	checker := mustOpenDB(t, url, "cor-checker", nil, tweak)
	open := func(name string) *store.Store { return openTarget(ctx, t, checker, stores[name].t, false) }
	ca, cb, cc := open("a"), open("b"), open("c")

	// --- store a: the shard with the truncated generation is blocked, the others merge.
	before := corruptCounter(t, met)
	_, err = ca.Prepare(ctx, store.PrepareParams{Shard: shardIDs[0]})
	assert.ErrorIs(t, err, store.ErrCorrupt, "store a shard 0 Prepare")
	assert.ErrorContains(t, err, badGen.Path, "store a shard 0 Prepare names the truncated generation")
	t.Logf("store a shard 0 Prepare: %v", err)
	assert.ErrorIs(t, errOf(mergeShard(ctx, ca, shardIDs[0])), store.ErrCorrupt, "store a shard 0 MergeOnce")
	assert.Greater(t, corruptCounter(t, met), before, "walkeeper_corrupt_objects_total did not grow on the truncated generation")
	for _, sh := range shardIDs[1:] {
		assert.NoError(t, errOf(mergeShard(ctx, ca, sh)), "store a: healthy shard %s", sh)
	}
	p := pendingOf(ctx, t, ca)
	if p[shardIDs[0]] != 2 || p[shardIDs[1]] != 0 || p[shardIDs[2]] != 0 {
		t.Errorf("store a pending per shard: %v; want 2 on the blocked shard %s, 0 elsewhere", p, shardIDs[0])
	}
	okA, corA := checkGets(ctx, t, ca, stores["a"].oracle, badGen.Path, badGen.MinKey, badGen.MaxKey)
	assert.Positive(t, corA, "store a: no Get hit the truncated generation")
	assert.ErrorIs(t, errOf(ca.List(ctx, store.ListOptions{Limit: 1000})), store.ErrCorrupt, "store a: a full listing over the truncated generation")
	if base, dups, err := ReadAll(ctx, ca, store.SourceBase, 100); err != nil || len(dups) > 0 {
		t.Errorf("store a: the base alone must stay listable: %v (dups %v)", err, dups)
	} else {
		t.Logf("store a: %d keys read, %d in the truncated generation's range fail with ErrCorrupt; listing source=all refused, source=base lists %d keys", okA, corA, len(base))
	}

	// --- store b: merges do not read the base, so every shard drains; reads in the garbled
	// run's range and compaction fail with ErrCorrupt; nothing is published over it.
	before = corruptCounter(t, met)
	drainShards(ctx, t, cb, shardIDs, "store b")
	okB, corB := checkGets(ctx, t, cb, stores["b"].oracle, badRun.Path, badRun.MinKey, badRun.MaxKey)
	assert.Positive(t, corB, "store b: no Get hit the garbled run")
	_, err = cb.CompactBase(ctx, store.CompactParams{MaxRuns: -1})
	assert.ErrorIs(t, err, store.ErrCorrupt, "store b CompactBase over the garbled run")
	assert.ErrorContains(t, err, badRun.Path, "store b CompactBase over the garbled run names it")
	assert.Greater(t, corruptCounter(t, met), before, "walkeeper_corrupt_objects_total did not grow on the garbled run")
	lb2 := layout(stores["b"])
	assert.Contains(t, lb2.Runs, badRun.Path, "store b: the garbled run is no longer referenced by base v%d", lb2.BaseVersion)
	t.Logf("store b: 3 shards merged (base v%d -> v%d), %d keys read, %d in the garbled run's range fail with ErrCorrupt; CompactBase refused: %v",
		baseVersionB, lb2.BaseVersion, okB, corB, err)

	// --- store c: the restarted owner of shard 2 cannot replay its WAL.
	restarted := mustOpenDB(t, url, "cor-w2", nil, tweak)
	rc := openTarget(ctx, t, restarted, stores["c"].t, false)
	before = corruptCounter(t, met)
	epochBefore := layout(stores["c"]).Shards[shardIDs[2]].WriterEpoch
	const tries = 3
	for i := 0; i < tries; i++ {
		_, err = rc.Append(ctx, []store.Row{Row("c2-after", int64(i+1))})
		pos := strings.TrimSuffix(badWAL[strings.LastIndexByte(badWAL, '/')+1:], ".arrow")
		pos = strings.TrimLeft(pos, "0")
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "WAL") || !strings.Contains(err.Error(), "/"+pos) {
			t.Errorf("restarted owner of store c shard 2: Append %d: want ErrCorrupt naming WAL position %s, got %v", i, pos, err)
		}
	}
	t.Logf("restarted owner of store c shard 2: Append fails: %v", err)
	assert.ErrorContains(t, err, badWAL, "the WAL error names the object key")
	assert.Greater(t, corruptCounter(t, met), before, "walkeeper_corrupt_objects_total did not move for the damaged WAL object")
	epochAfter := layout(stores["c"]).Shards[shardIDs[2]].WriterEpoch
	assert.LessOrEqual(t, epochAfter, epochBefore+1, "store c shard 2: %d failed appends moved writer_epoch: a retried append must not claim the shard again", tries)
	t.Logf("store c shard 2: %d failed appends moved writer_epoch %d -> %d; walkeeper_corrupt_objects_total %v -> %v on the WAL object",
		tries, epochBefore, epochAfter, before, corruptCounter(t, met))
	// The other shards keep appending and sealing.
	cs := stores["c"]
	for i := 0; i < 2; i++ {
		cs.write(ctx, t, i, keyRange(prefix("c", i), 25, 40), 4)
		cs.seal(ctx, t, i)
	}
	drainShards(ctx, t, cc, shardIDs, "store c")
	all, dups, err := ReadAll(ctx, cc, store.SourceAll, 37)
	require.NoError(t, err, "store c full read")
	assert.Empty(t, dups, "store c: keys listed twice")
	assert.Empty(t, cs.oracle.Verify(all), "store c oracle")
	for _, k := range walOnly {
		assert.NotContains(t, all, k, "store c: read although its only copy is the truncated WAL object")
	}
	t.Logf("store c: every shard merged to pending 0, %d keys read and match the oracle; the %d acknowledged rows whose only copy is the truncated WAL object are unreadable until it is repaired", len(all), len(walOnly))

	// Nothing the damage touched was deleted or rewritten, and the blocked generation is still listed.
	mustBytes(ctx, t, bucket, badGen.Path, genBytes)
	mustBytes(ctx, t, bucket, badRun.Path, runBytes)
	mustBytes(ctx, t, bucket, badWAL, walBytes)
	assert.Contains(t, layout(stores["a"]).Shards[shardIDs[0]].Listed, badGen.Path, "store a: the truncated generation is no longer listed")
	t.Logf("corrupt objects counted: %v", corruptCounter(t, met))

	// --- The operator sets the damaged generation and run aside (walkeeper quarantine): the
	// blocked shard merges, full reads and compaction work again, the objects stay in place,
	// and only keys inside the damaged objects' ranges may lose their newest version.
	qa, err := ca.Quarantine(ctx, badGen.Path, "reliability: truncated generation")
	require.NoError(t, err, "quarantine %s", badGen.Path)
	require.NotZero(t, qa.Rows, "quarantine %s", badGen.Path)
	drainShards(ctx, t, ca, shardIDs[:1], "store a after quarantine:")
	verifyOutside(ctx, t, ca, stores["a"].oracle, badGen.MinKey, badGen.MaxKey)
	qb, err := cb.Quarantine(ctx, badRun.Path, "reliability: garbled run")
	require.NoError(t, err, "quarantine %s", badRun.Path)
	require.NotZero(t, qb.Rows, "quarantine %s", badRun.Path)
	res, err := cb.CompactBase(ctx, store.CompactParams{MaxRuns: -1})
	if assert.NoError(t, err, "store b CompactBase after quarantine") {
		assert.True(t, res.Committed, "store b CompactBase after quarantine: %+v", res)
	}
	verifyOutside(ctx, t, cb, stores["b"].oracle, badRun.MinKey, badRun.MaxKey)
	mustBytes(ctx, t, bucket, badGen.Path, genBytes)
	mustBytes(ctx, t, bucket, badRun.Path, runBytes)
	t.Logf("quarantined generation %s (%d rows) and run %s (%d rows): store a merged to pending 0, store b compacted, full reads match the oracle outside the damaged ranges, both objects kept",
		qa.Path, qa.Rows, qb.Path, qb.Rows)
}

// verifyOutside reads s fully and checks every oracle key outside [min, max] (keys inside
// may have lost their newest version with a quarantined object).
func verifyOutside(ctx context.Context, t testing.TB, s *store.Store, o *Oracle, min, max string) {
	t.Helper()
	all, dups, err := ReadAll(ctx, s, store.SourceAll, 37)
	require.NoError(t, err, "%s full read after quarantine", s.Target())
	assert.Empty(t, dups, "%s: keys listed twice", s.Target())
	for _, k := range o.Keys() {
		if k >= min && k <= max {
			continue
		}
		v, present := all[k]
		assert.NoError(t, o.Allowed(k, v, present), "%s after quarantine", s.Target())
	}
}
