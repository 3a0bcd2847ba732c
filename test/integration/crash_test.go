package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// childEnv makes TestMain run a child process role instead of the tests.
const childEnv = "WALKEEPER_IT_CHILD"

// Environment of the "victim" child.
const (
	childStorage  = "WALKEEPER_IT_STORAGE"
	childInstance = "WALKEEPER_IT_INSTANCE"
	childTemporal = "WALKEEPER_IT_TEMPORAL"
	childNS       = "WALKEEPER_IT_NAMESPACE"
	childMarker   = "WALKEEPER_IT_MARKER"
)

func runChild(role string) int {
	switch role {
	case "victim":
		if err := runVictim(); err != nil {
			fmt.Fprintln(os.Stderr, "victim:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s role %q\n", childEnv, role)
	return 2
}

// runVictim is a worker process for the kill test: the activities of its own shard queue
// (Prepare, Commit, ...), registered exactly as worker.Worker registers them, over storage
// whose flushed-generation reads never return. Its Prepare therefore hangs mid-read until
// the process is killed; it writes the marker file when that happens.
func runVictim() error {
	ctx := context.Background()
	logger, err := zap.NewProduction()
	if err != nil {
		return err
	}
	b, err := objstore.OpenBucket(ctx, os.Getenv(childStorage))
	if err != nil {
		return err
	}
	var once sync.Once
	marker := os.Getenv(childMarker)
	faulty := b.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.Contains(key, "/_mem_wal/") && strings.Contains(key, "/gen/") {
			once.Do(func() { _ = os.WriteFile(marker, []byte(key), 0o644) })
			for {
				time.Sleep(time.Hour) // until SIGKILL
			}
		}
		return nil
	}})
	opts := store.DefaultOptions()
	opts.InstanceID = os.Getenv(childInstance)
	opts.Logger = logger
	opts.Budget = store.NewBudget(worker.DefaultConfig().MergeBudgetBytes)
	db := store.OpenDBOnBucket(faulty, opts)
	c, err := temporaladmin.Dial(ctx, temporaladmin.Config{HostPort: os.Getenv(childTemporal), Namespace: os.Getenv(childNS)}, logger)
	if err != nil {
		return err
	}
	w := tworker.New(c, contract.ShardQueue(db.Shard()), tworker.Options{
		Identity:                           fmt.Sprintf("victim-%d", os.Getpid()),
		MaxConcurrentActivityExecutionSize: 4,
		DisableWorkflowWorker:              true,
	})
	activities.Register(w, &activities.Activities{DB: db, Logger: logger, Client: c})
	if err := w.Start(); err != nil {
		return err
	}
	fmt.Println("victim ready")
	for {
		time.Sleep(time.Hour)
	}
}

// cleanEnv is the test's environment without WALKEEPER_* variables, for child processes.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALKEEPER_") {
			out = append(out, kv)
		}
	}
	return out
}

// workerProc starts the walkeeper binary's `worker` command as instance on the test's storage
// root and namespace, with no sweep and no flush sweeper (more flags in args), its log named by
// the test and logSuffix; it is killed when the test ends unless stopped before.
func (e *env) workerProc(t *testing.T, bin, instance, logSuffix string, args ...string) *walkeeperproc.Worker {
	t.Helper()
	w := &walkeeperproc.Worker{Bin: bin, Instance: instance, Log: suite.LogPath(safeName(t.Name()) + logSuffix), OwnWalkeeperEnv: true,
		Args: append([]string{"--storage", e.storage, "--temporal", e.hostPort, "--namespace", e.ns,
			"--sweep-interval", "0", "--flush-interval", "0", "--log-format", "json", "--log-level", "info"}, args...)}
	w.Start(t)
	t.Cleanup(w.Kill)
	return w
}

// A worker killed mid-prepare → the workflow completes on retry with nothing lost. The
// shard's owner is a real OS process whose Prepare hangs reading a generation; it is
// SIGKILLed there. Its replacement, the walkeeper binary's `worker` command with the same
// instance id, picks up the retried Prepare once the killed attempt times out. The merge
// completes; every acknowledged row is read exactly once with its newest value, deleted rows
// stay deleted, nothing is pending, and no staged file leaked.
func TestWorkerKilledMidPrepare(t *testing.T) {
	e := newEnv(t)
	const instance = "victim"
	target := mustTarget(t, "generic:crash")

	// Acknowledged writes of the victim's shard: 5 generations with overlapping keys and
	// some deletes; want is the newest version of every live key.
	db := e.openDB(instance, nil)
	s := e.createStore(db, target.String())
	want := map[string]float64{}
	for g := range 5 {
		var rows []map[string]any
		for i := range 40 {
			id := fmt.Sprintf("k%03d", g*20+i)
			rows = append(rows, map[string]any{"id": id, "v": g})
			want[id] = float64(g)
		}
		e.appendJSON(s, rows)
		if g == 3 {
			for _, id := range []string{"k000", "k045", "k071"} {
				if err := s.Delete(e.ctx(waitShort), id); err != nil {
					t.Fatal(err)
				}
				delete(want, id)
			}
		}
		e.flush(s)
	}
	if err := db.Close(e.ctx(waitShort)); err != nil {
		t.Fatal(err)
	}
	shard := store.ShardID(instance)

	// The rest of the fleet: runs the workflows and the shared queue.
	e.startWorker(e.config("fleet"))

	// The victim process.
	marker := filepath.Join(e.dir, "prepare-started")
	victimLog := suite.LogPath(safeName(t.Name()) + ".victim")
	vp, err := proc.Start(proc.Spec{Path: os.Args[0], Log: victimLog, Environ: cleanEnv(), Env: []string{
		childEnv + "=victim",
		childStorage + "=" + e.storage,
		childInstance + "=" + instance,
		childTemporal + "=" + e.hostPort,
		childNS + "=" + e.ns,
		childMarker + "=" + marker,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vp.Stop(syscall.SIGKILL, time.Minute) })
	if err := vp.WaitFor(e.ctx(waitLong), waitLong, func() error {
		if log, err := os.ReadFile(victimLog); err != nil || !strings.Contains(string(log), "\nvictim ready\n") {
			return fmt.Errorf("the victim has not started (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	run := e.startMerge(target.String(), contract.MergeWalInput{
		// A killed attempt is retried once this passes (its heartbeat timeout is longer).
		PrepareTimeout: 20 * time.Second,
		// Wait for the owner's replacement rather than fall back to the shared queue.
		ScheduleToStartTimeout: 5 * time.Minute,
	})
	waitFor(t, waitLong, "the victim's Prepare to hang mid-read", func() (bool, error) {
		_, err := os.Stat(marker)
		return err == nil, nil
	})
	if ok, err := e.pendingActivity(run.GetID(), run.GetRunID(), contract.PrepareActivity, true); err != nil || !ok {
		t.Fatalf("Temporal does not show Prepare running (%v)", err)
	}
	if err := vp.Stop(syscall.SIGKILL, time.Minute); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()

	// The replacement: same instance id, a new process, the real binary.
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	rep := e.workerProc(t, bin, instance, ".replacement")

	res := e.mergeResult(run, waitLong)
	t.Logf("merge completed %s after the kill: %+v", time.Since(killedAt).Round(time.Millisecond), res)
	if len(res.Shards) != 1 || res.Shards[0].Shard != shard || res.Shards[0].Reclaimed != 5 || res.Shards[0].Error != "" {
		t.Fatalf("result %+v: want shard %s with 5 generations reclaimed", res, shard)
	}

	a := newAPI(t, rep.Listen)
	var st httpStats
	a.must(200, "GET", "/api/v1/stores/generic/crash/stats", nil, &st)
	if st.pending() != 0 {
		t.Fatalf("pending after the merge: %+v", st)
	}
	seen := map[string]bool{}
	for _, r := range a.allRows("generic", "crash") {
		id, _ := r["id"].(string)
		if seen[id] {
			t.Errorf("row %s read twice", id)
		}
		seen[id] = true
		if v, ok := want[id]; !ok {
			t.Errorf("row %s read but it was deleted or never written", id)
		} else if r["v"] != v {
			t.Errorf("row %s: v=%v, want the newest %v", id, r["v"], v)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("acknowledged row %s lost", id)
		}
	}
	for _, id := range []string{"k000", "k045", "k071"} {
		if code := a.call("GET", "/api/v1/stores/generic/crash/rows/"+id, nil, nil); code != 404 {
			t.Errorf("deleted row %s: GET %d, want 404", id, code)
		}
	}

	// No staged file leaked: every data file is a run of the base manifest.
	files, err := os.ReadDir(filepath.Join(e.dir, "storage", "generic", "crash", "data"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != st.Runs {
		var names []string
		for _, f := range files {
			names = append(names, f.Name())
		}
		t.Errorf("%d data files %v, base manifest lists %d runs", len(files), names, st.Runs)
	}

	// The replacement shuts down cleanly.
	if code, err := rep.Stop(2 * time.Minute); err != nil || code != 0 {
		t.Errorf("replacement worker: exit %d after SIGTERM (%v)", code, err)
	}
}
