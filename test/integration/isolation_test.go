package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// gate blocks storage reads of one store's flushed generations until it is opened: a
// rollout pass that is as slow as the test wants.
type gate struct {
	prefix  string // "<kind>/<name>/"
	entered chan struct{}
	once    sync.Once
	open    chan struct{}
}

func newGate(target store.Target) *gate {
	return &gate{prefix: target.Path() + "/", entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) Before(op, key string) error {
	if op != objstore.OpGet || !strings.HasPrefix(key, g.prefix) || !strings.Contains(key, "/_mem_wal/") || !strings.Contains(key, "/gen/") {
		return nil
	}
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.open:
	case <-time.After(5 * time.Minute): // never strand the process if the test dies
	}
	return nil
}

func (g *gate) After(op, key string, err error) error { return err }

// A slow rollout pass does not delay generic merges: the worker's rollout Prepare is stuck
// reading a generation (fault-injected storage) while a generic MergeWal on the same worker,
// same shard queue, runs start to finish; only then is the rollout pass let go, and it
// completes too.
func TestSlowRolloutDoesNotDelayGenericMerge(t *testing.T) {
	e := newEnv(t)
	rollout, generic := mustTarget(t, "rollout:slow"), mustTarget(t, "generic:fast")

	// One writer shard holds pending generations of both stores.
	writer := e.openDB("writer", nil)
	rs := e.createStore(writer, rollout.String())
	for g := range 3 {
		rows := make([]map[string]any, 20)
		for i := range rows {
			rows[i] = map[string]any{"id": fmt.Sprintf("r%d-%d", g, i), "run_id": "run", "step": g, "reward": 0.5, "done": false}
		}
		e.appendJSON(rs, rows)
		e.flush(rs)
	}
	gs := e.createStore(writer, generic.String())
	e.writeGenerations(gs, "g", 3, 20)
	if err := writer.Close(e.ctx(waitShort)); err != nil {
		t.Fatal(err)
	}

	// The worker owning that shard reads rollout generations through the gate.
	g := newGate(rollout)
	t.Cleanup(func() {
		select {
		case <-g.open:
		default:
			close(g.open)
		}
	})
	db := e.openDBWithFaults("writer", g, nil)
	e.startHarness(harnessOptions{Shared: db, Shards: []*store.DB{db}})

	slow := e.startMerge(rollout.String(), contract.MergeWalInput{})
	select {
	case <-g.entered:
	case <-time.After(waitLong):
		t.Fatal("the rollout Prepare never reached its first generation read")
	}

	start := time.Now()
	fast := e.startMerge(generic.String(), contract.MergeWalInput{})
	res := e.mergeResult(fast, waitLong)
	took := time.Since(start)
	if res.Reclaimed != 3 || res.Shards[0].Error != "" {
		t.Fatalf("generic merge: %+v", res)
	}
	// Loose bound: the point is that it finished at all while the rollout pass is stuck.
	if took > 90*time.Second {
		t.Errorf("generic merge took %s while the rollout pass was slow", took)
	}
	if !e.isRunning(slow.GetID(), slow.GetRunID()) {
		t.Fatal("the rollout merge finished although its Prepare was blocked")
	}
	if ok, err := e.pendingActivity(slow.GetID(), slow.GetRunID(), contract.PrepareActivity, true); err != nil || !ok {
		t.Fatalf("rollout Prepare no longer in flight when the generic merge finished (%v)", err)
	}
	t.Logf("generic MergeWal finished in %s while the rollout Prepare was blocked", took.Round(time.Millisecond))

	close(g.open)
	if res := e.mergeResult(slow, waitLong); res.Reclaimed != 3 {
		t.Fatalf("rollout merge: %+v", res)
	}
	for _, tg := range []store.Target{rollout, generic} {
		if st := e.stats(db, tg.String()); st.TotalPending() != 0 || st.Rows != 60 {
			t.Errorf("%s after merge: pending %d rows %d, want 0 and 60", tg, st.TotalPending(), st.Rows)
		}
	}
}

// A shard whose owner stopped still gets merged: worker A writes and seals, then stops, so
// nobody polls walkeeper-shard-<A>; worker B alone runs MergeWal, whose Prepare and Commit
// for A's shard fall back to the shared queue after the (short) schedule-to-start timeout.
func TestStoppedOwnerShardStillMerged(t *testing.T) {
	e := newEnv(t)
	const target = "generic:orphan"

	wa := e.startWorker(e.config("owner-a"))
	a := newAPI(t, wa.HTTPAddr())
	a.create("orphan")
	want := map[string]float64{}
	for g := range 3 {
		var rows []map[string]any
		for i := range 10 {
			id := fmt.Sprintf("a%02d", g*5+i) // overlapping keys: the newest generation wins
			rows = append(rows, map[string]any{"id": id, "v": g})
			want[id] = float64(g)
		}
		a.must(200, "POST", "/api/v1/stores/generic/orphan/rows", rows, nil)
		var fl struct {
			Sealed bool `json:"sealed"`
		}
		a.must(200, "POST", "/api/v1/stores/generic/orphan/flush", nil, &fl)
		if !fl.Sealed {
			t.Fatal("flush sealed nothing")
		}
	}
	shardA := wa.DB().Shard()
	if err := wa.Stop(e.ctx(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}

	wb := e.startWorker(e.config("worker-b"))
	start := time.Now()
	run := e.startMerge(target, contract.MergeWalInput{ScheduleToStartTimeout: 3 * time.Second})
	res := e.mergeResult(run, waitLong)
	t.Logf("merged the orphaned shard in %s", time.Since(start).Round(time.Millisecond))
	if len(res.Shards) != 1 || res.Shards[0].Shard != shardA || res.Shards[0].Reclaimed != 3 ||
		!res.Shards[0].SharedQueue || res.Shards[0].Error != "" {
		t.Fatalf("result %+v: want shard %s merged through the shared queue, 3 generations", res, shardA)
	}
	b := newAPI(t, wb.HTTPAddr())
	if p := b.pending("orphan"); p != 0 {
		t.Fatalf("%d pending after merge", p)
	}
	rows := b.allRows("generic", "orphan")
	if len(rows) != len(want) {
		t.Fatalf("read %d rows, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		if id := r["id"].(string); r["v"] != want[id] {
			t.Errorf("row %s: v=%v, want %v", id, r["v"], want[id])
		}
	}
}
