package upgrade

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/target"
	"github.com/walkeeper/walkeeper/test/reliability"
)

// The workload: enough one-generation passes that the rolling restart lands while merges
// run, on any machine (each worker's shard queue runs one prepare at a time: --merge-slots 1).
const (
	stores        = 16
	gensPerWorker = 10 // generations each worker seals in each store before the upgrade
	rowsPerGen    = 20
	keysPerWorker = 97 // keys are rewritten across generations: the newest value must win
	passesPerRun  = 3  // continue-as-new every 3 passes: runs start throughout the upgrade
	wave2Stores   = 4  // stores sealed again once every worker runs B
	stopGrace     = time.Minute
	// mergeWait leaves room for tasks lost on their way to a worker, each run again after
	// its heartbeat timeout (a minute; see run.timeouts), on a busy machine.
	mergeWait = 8 * time.Minute
)

// TestRollingUpgradeKeepsMergesRunning upgrades a fleet of two `walkeeper worker` processes
// from build A (this tree) to build B (this tree with a gated workflow change) with a rolling
// restart while MergeWal runs are in flight, then reads every history and every row.
func TestRollingUpgradeKeepsMergesRunning(t *testing.T) {
	testtemporal.SkipShort(t)
	t0 := time.Now()
	dir := t.TempDir()
	bs := buildAB(t, dir)
	t.Logf("builds A and B ready: %s", time.Since(t0).Round(time.Millisecond))

	hostPort, c := testtemporal.Start(t)
	storage := "file://" + filepath.Join(dir, "storage") + "?nosync=1"
	common := []string{"--storage", storage, "--temporal", hostPort, "--flush-interval", "0",
		"--merge-after-generations", "0", "--sweep-interval", "0", "--merge-max-generations", "1",
		"--merge-slots", "1", "--log-format", "json", "--log-level", "info", "--temporal-wait", "2m",
		"--shutdown-timeout", "30s"}
	f := &fleet{t: t, build: map[int]string{}}
	for i := range 2 {
		w := &walkeeperproc.Worker{Bin: bs.a, Instance: fmt.Sprintf("upg-%d", i+1),
			Log: filepath.Join(dir, fmt.Sprintf("upg-%d.log", i+1)), Args: common}
		f.start(w, "A")
	}
	t.Cleanup(f.stopAll)

	ld := newLoad(t, f)
	for s := range stores {
		ld.create(storeName(s))
	}
	for s := range stores {
		for range gensPerWorker {
			ld.sealEverywhere(storeName(s))
		}
	}
	in := contract.MergeWalInput{MaxGenerations: ptr(1), PassesPerWorkflowRun: passesPerRun}
	var chains []chainStart
	for s := range stores {
		chains = append(chains, startMerge(t, c, storeName(s), in))
	}
	t.Logf("build A: %d stores × %d workers × %d generations sealed, %d merges started: %s",
		stores, len(f.workers), gensPerWorker, stores, time.Since(t0).Round(time.Millisecond))

	// B arrives once the merges are well under way (some chains have continued as new on A)
	// and far from done: a quarter of the passes committed, if each commit holds one pass.
	waitFor(t, mergeWait, "a quarter of the passes to commit", func() bool {
		var versions uint64
		for s := range stores {
			versions += ld.stats(storeName(s)).BaseVersion
		}
		return versions >= stores*gensPerWorker/2
	})
	inFlight := running(t, c, chains)
	if inFlight < 2 {
		t.Fatalf("only %d merges in flight when the upgrade began: the workload no longer outlasts the restart; make it larger", inFlight)
	}
	upgradeAt := time.Now()

	// The rolling restart: one instance at a time, SIGTERM (drain) then the same instance on B.
	for i, w := range f.workers {
		code, err := w.Stop(stopGrace)
		if err != nil || code != 0 {
			t.Fatalf("build A worker %s did not drain on SIGTERM (exit %d, %v); log:\n%s", w.Instance, code, err, w.Output())
		}
		nw := &walkeeperproc.Worker{Bin: bs.b, Instance: w.Instance, Listen: w.Listen, Log: w.Log, Args: common}
		f.workers[i] = nw
		f.start(nw, "B")
	}
	inFlightAfter := running(t, c, chains)
	t.Logf("rolling restart to B took %s; merges in flight: %d when it began, %d after it", time.Since(upgradeAt).Round(time.Millisecond), inFlight, inFlightAfter)

	// Wave 2: merges that start on B alone (or join a run still going).
	for s := range wave2Stores {
		ld.sealEverywhere(storeName(s))
		chains = append(chains, startMerge(t, c, storeName(s), in))
	}

	for _, ch := range chains {
		ctx, cancel := context.WithTimeout(context.Background(), mergeWait)
		var res contract.MergeWalResult
		err := c.GetWorkflow(ctx, ch.id, ch.runID).Get(ctx, &res)
		cancel()
		if err != nil {
			t.Fatalf("MergeWal %s did not complete: %v\n%s\nlogs:\n%s\n%s", ch.id, err, diagnose(c, ch.id),
				f.workers[0].Output(), f.workers[1].Output())
		}
		for _, sh := range res.Shards {
			if sh.Error != "" {
				t.Errorf("%s shard %s: %s", ch.id, sh.Shard, sh.Error)
			}
		}
	}
	t.Logf("every merge completed: %s", time.Since(t0).Round(time.Millisecond))

	h := readHistories(t, c, f, chains)
	h.check(t)
	if h.reclaimed != ld.sealed {
		t.Errorf("the merges reclaimed %d generations, %d were sealed: a generation was lost or merged twice", h.reclaimed, ld.sealed)
	}
	ld.verify(storage)
	t.Logf("upgrade under load: %d merges in flight when B arrived; %d workflow runs: %d started on A (%d of them finished on B), %d started on B; chains finished on A: %d, on B: %d; %d NoteMergePlan attempts first failed on an A worker; tasks timed out (lost on the way to a worker): %v; %s in all",
		inFlight, len(h.runs), h.startedA, h.crossed, h.startedB, h.chainsEndedOn["A"], h.chainsEndedOn["B"], h.noteRetried, h.timeouts, time.Since(t0).Round(time.Millisecond))
}

func storeName(i int) string { return fmt.Sprintf("up%02d", i) }

func ptr[T any](v T) *T { return &v }

// fleet is the running worker processes and the build each process id ran.
type fleet struct {
	t       *testing.T
	workers []*walkeeperproc.Worker
	build   map[int]string // pid -> "A" or "B"
}

func (f *fleet) start(w *walkeeperproc.Worker, build string) {
	f.t.Helper()
	w.Start(f.t)
	f.build[w.Pid()] = build
	for _, have := range f.workers {
		if have == w {
			return
		}
	}
	f.workers = append(f.workers, w)
}

func (f *fleet) stopAll() {
	for _, w := range f.workers {
		_, _ = w.Stop(stopGrace)
	}
}

// chainStart is a started (or joined) MergeWal: its workflow ID and the run the start returned.
type chainStart struct{ id, runID string }

func startMerge(t *testing.T, c client.Client, name string, in contract.MergeWalInput) chainStart {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := contract.StartMergeWal(ctx, c, target.Target{Kind: target.KindGeneric, Name: name}, in)
	if err != nil {
		t.Fatalf("start MergeWal of %s: %v", name, err)
	}
	return chainStart{id: run.GetID(), runID: run.GetRunID()}
}

// running counts the chains whose current run is still running.
func running(t *testing.T, c client.Client, chains []chainStart) int {
	t.Helper()
	n := 0
	for _, ch := range chains {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		d, err := c.DescribeWorkflowExecution(ctx, ch.id, "")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// load writes the stores through the workers' HTTP data plane and keeps one oracle per store.
type load struct {
	t      *testing.T
	f      *fleet
	oracle map[string]*reliability.Oracle
	next   map[string]int64 // "<store>/<key>" -> the last value appended
	gen    map[string]int   // store -> generations sealed per worker so far
	sealed int              // generations sealed in all
}

func newLoad(t *testing.T, f *fleet) *load {
	return &load{t: t, f: f, oracle: map[string]*reliability.Oracle{}, next: map[string]int64{}, gen: map[string]int{}}
}

func (l *load) url(w *walkeeperproc.Worker, name, rest string) string {
	return "http://" + w.Listen + "/api/v1/stores/generic/" + name + rest
}

func (l *load) call(method, url string, body, out any) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := apitest.Do(ctx, apitest.JSON(method, url, body))
	if err != nil {
		l.t.Fatal(err)
	}
	if r.Status >= 300 {
		l.t.Fatalf("%s %s: %d %s", method, url, r.Status, r.Body)
	}
	if err := r.Decode(out); err != nil {
		l.t.Fatalf("%s %s: %v", method, url, err)
	}
}

func (l *load) create(name string) {
	l.call(http.MethodPost, l.url(l.f.workers[0], name, ""), map[string]any{"fields": reliability.Schema.Fields}, nil)
	l.oracle[name] = reliability.NewOracle()
}

// sealEverywhere appends one batch to the store on every worker and seals it: one pending
// generation per worker's shard.
func (l *load) sealEverywhere(name string) {
	l.t.Helper()
	g := l.gen[name]
	l.gen[name]++
	o := l.oracle[name]
	for wi, w := range l.f.workers {
		rows := make([]map[string]any, rowsPerGen)
		keys := make([]string, rowsPerGen)
		vals := make([]int64, rowsPerGen)
		for j := range rows {
			k := fmt.Sprintf("w%d-%03d", wi, (g*rowsPerGen+j*5)%keysPerWorker)
			l.next[name+"/"+k]++
			keys[j], vals[j] = k, l.next[name+"/"+k]
			o.Attempt(k, vals[j])
			rows[j] = map[string]any{"id": k, "v": vals[j], "pad": "x"}
		}
		l.call(http.MethodPost, l.url(w, name, "/rows"), rows, nil)
		for j := range keys {
			o.Ack(keys[j], vals[j])
		}
		l.call(http.MethodPost, l.url(w, name, "/flush"), nil, nil)
		l.sealed++
	}
}

func (l *load) stats(name string) store.Stats {
	l.t.Helper()
	var st store.Stats
	l.call(http.MethodGet, l.url(l.f.workers[0], name, "/stats"), nil, &st)
	return st
}

// verify reads every store through a fresh reader of the storage root: every acknowledged
// row with its newest value, no key twice, nothing pending.
func (l *load) verify(storage string) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	opts := store.DefaultOptions()
	opts.InstanceID = "upg-verifier"
	db, err := store.OpenDB(ctx, storage, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	keys := 0
	for s := range stores {
		name := storeName(s)
		st, err := db.Open(ctx, store.Target{Kind: store.KindGeneric, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		rows, dups, err := reliability.ReadAll(ctx, st, store.SourceAll, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(dups) > 0 {
			t.Errorf("%s: keys read twice: %v", name, dups)
		}
		for _, v := range l.oracle[name].Verify(rows) {
			t.Errorf("%s: %s", name, v)
		}
		stats, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p := stats.TotalPending(); p != 0 {
			t.Errorf("%s: %d generations still pending after every merge completed", name, p)
		}
		keys += len(rows)
	}
	t.Logf("verified %d stores, %d keys against the oracle; nothing pending", stores, keys)
}
