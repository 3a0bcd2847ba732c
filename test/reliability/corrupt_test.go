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
	if err := m.CorruptObjects.WithLabelValues(string(store.KindGeneric)).Write(&d); err != nil {
		t.Fatal(err)
	}
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
	if _, err := cs.byProc[shard].Append(ctx, rows); err != nil {
		t.Fatalf("%s shard %d append: %v", cs.name, shard, err)
	}
	for _, k := range keys {
		cs.oracle.Ack(k, v)
	}
}

func (cs *corruptStore) seal(ctx context.Context, t testing.TB, shard int) {
	t.Helper()
	if _, err := cs.byProc[shard].Flush(ctx); err != nil {
		t.Fatalf("%s shard %d flush: %v", cs.name, shard, err)
	}
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
		if _, err := mergeShard(ctx, s, sh); err != nil {
			t.Errorf("%s shard %s: %v", what, sh, err)
		}
	}
	for sh, n := range pendingOf(ctx, t, s) {
		if n != 0 {
			t.Errorf("%s shard %s: %d pending after merging", what, sh, n)
		}
	}
}

func pendingOf(ctx context.Context, t testing.TB, s *store.Store) map[string]int {
	t.Helper()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatalf("stats %s: %v", s.Target(), err)
	}
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
			if e := o.Allowed(k, v, true); e != nil {
				t.Errorf("%s: %v", s.Target(), e)
			}
			ok++
		case inside && errors.Is(err, store.ErrCorrupt):
			if !strings.Contains(err.Error(), damagedKey) {
				t.Errorf("Get %s: the corrupt error does not name the damaged object %s: %v", k, damagedKey, err)
			}
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
		if _, err := cs.byProc[0].MergeAll(ctx); err != nil {
			t.Fatalf("round-1 merge of %s: %v", cs.name, err)
		}
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
		if _, err := stores["c"].byProc[2].Append(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}

	bucket := procs[0].Bucket()
	layout := func(cs *corruptStore) *Layout {
		t.Helper()
		l, err := InspectLayout(ctx, bucket, cs.t)
		if err != nil {
			t.Fatal(err)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	genBytes = genBytes[:len(genBytes)/2]
	if err := bucket.Put(ctx, badGen.Path, genBytes); err != nil {
		t.Fatal(err)
	}

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
	if err != nil {
		t.Fatal(err)
	}
	for i := 8; i < len(runBytes)-8; i += 7 {
		runBytes[i] ^= 0x5a
	}
	if err := bucket.Put(ctx, badRun.Path, runBytes); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	walBytes = walBytes[:len(walBytes)*2/3]
	if err := bucket.Put(ctx, badWAL, walBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged: generation %s (truncated, keys %s..%s), run %s (garbled, keys %s..%s), WAL %s (truncated, %d rows)",
		badGen.Path, badGen.MinKey, badGen.MaxKey, badRun.Path, badRun.MinKey, badRun.MaxKey, badWAL, len(walOnly))

	// A fresh process (no cache) does the merging and the reads from here on.
	checker := mustOpenDB(t, url, "cor-checker", nil, tweak)
	open := func(name string) *store.Store { return openTarget(ctx, t, checker, stores[name].t, false) }
	ca, cb, cc := open("a"), open("b"), open("c")

	// --- store a: the shard with the truncated generation is blocked, the others merge.
	before := corruptCounter(t, met)
	_, err = ca.Prepare(ctx, store.PrepareParams{Shard: shardIDs[0]})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), badGen.Path) {
		t.Errorf("store a shard 0 Prepare: want ErrCorrupt naming %s, got %v", badGen.Path, err)
	} else {
		t.Logf("store a shard 0 Prepare: %v", err)
	}
	if _, err := mergeShard(ctx, ca, shardIDs[0]); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("store a shard 0 MergeOnce: want ErrCorrupt, got %v", err)
	}
	if got := corruptCounter(t, met); got <= before {
		t.Errorf("walkeeper_corrupt_objects_total did not grow on the truncated generation (%v -> %v)", before, got)
	}
	for _, sh := range shardIDs[1:] {
		if _, err := mergeShard(ctx, ca, sh); err != nil {
			t.Errorf("store a: healthy shard %s: %v", sh, err)
		}
	}
	p := pendingOf(ctx, t, ca)
	if p[shardIDs[0]] != 2 || p[shardIDs[1]] != 0 || p[shardIDs[2]] != 0 {
		t.Errorf("store a pending per shard: %v; want 2 on the blocked shard %s, 0 elsewhere", p, shardIDs[0])
	}
	okA, corA := checkGets(ctx, t, ca, stores["a"].oracle, badGen.Path, badGen.MinKey, badGen.MaxKey)
	if corA == 0 {
		t.Errorf("store a: no Get hit the truncated generation")
	}
	if _, err := ca.List(ctx, store.ListOptions{Limit: 1000}); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("store a: a full listing over the truncated generation: want ErrCorrupt, got %v", err)
	}
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
	if corB == 0 {
		t.Errorf("store b: no Get hit the garbled run")
	}
	_, err = cb.CompactBase(ctx, store.CompactParams{MaxRuns: -1})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), badRun.Path) {
		t.Errorf("store b CompactBase over the garbled run: want ErrCorrupt naming %s, got %v", badRun.Path, err)
	}
	if got := corruptCounter(t, met); got <= before {
		t.Errorf("walkeeper_corrupt_objects_total did not grow on the garbled run (%v -> %v)", before, got)
	}
	lb2 := layout(stores["b"])
	if !slices.Contains(lb2.Runs, badRun.Path) {
		t.Errorf("store b: the garbled run %s is no longer referenced by base v%d", badRun.Path, lb2.BaseVersion)
	}
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
	if !strings.Contains(err.Error(), badWAL) {
		t.Errorf("the WAL error does not name the object key %s: %v", badWAL, err)
	}
	if got := corruptCounter(t, met); got <= before {
		t.Errorf("walkeeper_corrupt_objects_total did not move for the damaged WAL object (%v -> %v)", before, got)
	}
	epochAfter := layout(stores["c"]).Shards[shardIDs[2]].WriterEpoch
	if epochAfter > epochBefore+1 {
		t.Errorf("store c shard 2: %d failed appends moved writer_epoch %d -> %d: a retried append must not claim the shard again", tries, epochBefore, epochAfter)
	}
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
	if err != nil {
		t.Fatalf("store c full read: %v", err)
	}
	if len(dups) > 0 {
		t.Errorf("store c: keys listed twice: %v", dups)
	}
	for _, v := range cs.oracle.Verify(all) {
		t.Errorf("store c oracle: %s", v)
	}
	for _, k := range walOnly {
		if _, ok := all[k]; ok {
			t.Errorf("store c: %s read although its only copy is the truncated WAL object", k)
		}
	}
	t.Logf("store c: every shard merged to pending 0, %d keys read and match the oracle; the %d acknowledged rows whose only copy is the truncated WAL object are unreadable until it is repaired", len(all), len(walOnly))

	// Nothing the damage touched was deleted or rewritten, and the blocked generation is still listed.
	mustBytes(ctx, t, bucket, badGen.Path, genBytes)
	mustBytes(ctx, t, bucket, badRun.Path, runBytes)
	mustBytes(ctx, t, bucket, badWAL, walBytes)
	if l := layout(stores["a"]); !slices.Contains(l.Shards[shardIDs[0]].Listed, badGen.Path) {
		t.Errorf("store a: the truncated generation is no longer listed: %s", l.Summary())
	}
	t.Logf("corrupt objects counted: %v", corruptCounter(t, met))

	// --- The operator sets the damaged generation and run aside (walkeeper quarantine): the
	// blocked shard merges, full reads and compaction work again, the objects stay in place,
	// and only keys inside the damaged objects' ranges may lose their newest version.
	qa, err := ca.Quarantine(ctx, badGen.Path, "reliability: truncated generation")
	if err != nil || qa.Rows == 0 {
		t.Fatalf("quarantine %s: %+v, %v", badGen.Path, qa, err)
	}
	if _, err := mergeShard(ctx, ca, shardIDs[0]); err != nil {
		t.Errorf("store a shard 0 after quarantine: %v", err)
	}
	for sh, n := range pendingOf(ctx, t, ca) {
		if n != 0 {
			t.Errorf("store a shard %s: %d pending after quarantine and merge", sh, n)
		}
	}
	verifyOutside(ctx, t, ca, stores["a"].oracle, badGen.MinKey, badGen.MaxKey)
	qb, err := cb.Quarantine(ctx, badRun.Path, "reliability: garbled run")
	if err != nil || qb.Rows == 0 {
		t.Fatalf("quarantine %s: %+v, %v", badRun.Path, qb, err)
	}
	if res, err := cb.CompactBase(ctx, store.CompactParams{MaxRuns: -1}); err != nil || !res.Committed {
		t.Errorf("store b CompactBase after quarantine: %+v, %v", res, err)
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
	if err != nil {
		t.Fatalf("%s full read after quarantine: %v", s.Target(), err)
	}
	if len(dups) > 0 {
		t.Errorf("%s: keys listed twice: %v", s.Target(), dups)
	}
	for _, k := range o.Keys() {
		if k >= min && k <= max {
			continue
		}
		v, present := all[k]
		if err := o.Allowed(k, v, present); err != nil {
			t.Errorf("%s after quarantine: %v", s.Target(), err)
		}
	}
}
