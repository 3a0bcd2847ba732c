package reliability

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
	"github.com/walkeeper/walkeeper/store"
)

// The process-level half of the suite: real `walkeeper worker` processes (the binary built
// from cmd/walkeeper) and a real Temporal dev server (`temporal server start-dev` with an
// on-disk database), killed and restarted mid-merge.

var walkeeperBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildWalkeeper builds cmd/walkeeper once per test process.
func buildWalkeeper(t *testing.T) string {
	t.Helper()
	walkeeperBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "walkeeper-bin-")
		if err != nil {
			walkeeperBin.err = err
			return
		}
		walkeeperBin.dir = dir
		walkeeperBin.path, walkeeperBin.err = walkeeperproc.Build(filepath.Join(dir, "walkeeper"))
	})
	if walkeeperBin.err != nil {
		t.Fatal(walkeeperBin.err)
	}
	return walkeeperBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if walkeeperBin.dir != "" {
		_ = os.RemoveAll(walkeeperBin.dir)
	}
	os.Exit(code)
}

// stopGrace is how long a SIGTERMed worker may drain before it is killed.
const stopGrace = 30 * time.Second

// httpJSON sends body as JSON and decodes the answer into out; a status of 300 or more is an
// error. It fails no test, so the load goroutines can call it.
func httpJSON(method, url string, body any, out any) (int, error) {
	r, err := apitest.Do(context.Background(), apitest.JSON(method, url, body))
	if err != nil {
		return 0, err
	}
	if err := r.Decode(out); err != nil {
		return r.Status, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if r.Status >= 300 {
		return r.Status, fmt.Errorf("%s %s: %d %s", method, url, r.Status, r.Body)
	}
	return r.Status, nil
}

// temporalRig is a Temporal server whose database survives restarts, plus a client: the dev
// server by default, the PostgreSQL-backed cluster with WALKEEPER_TEST_TEMPORAL_SERVER=cluster
// (internal/testkit/testtemporal).
type temporalRig struct {
	srv     testtemporal.Restartable
	c       client.Client
	restart int
}

// faults are what a round injects mid-merge, in turn; the cluster adds a PostgreSQL restart
// under the running server.
func (r *temporalRig) faults() []string {
	if r.srv.RestartPersistence != nil {
		return []string{"kill-worker", "restart-temporal", "restart-postgres"}
	}
	return []string{"kill-worker", "restart-temporal"}
}

type rigLoad struct {
	oracle *Oracle
	next   map[string]int64
}

// TestWorkerProcessesSurviveKillsAndTemporalRestarts: two `walkeeper worker` processes share
// one file:// root and one Temporal server (testtemporal.StartRestartable: the dev server, or
// the PostgreSQL-backed cluster). Each round seals generations on both workers through the
// HTTP data plane, starts MergeWal (one pass = one generation, so the merge takes many
// activities), and mid-merge either SIGKILLs a worker and restarts it (same instance), or
// stops the Temporal server process and restarts it on the same database, or (cluster)
// restarts PostgreSQL under the running server.
// Every MergeWal must complete; then the oracle checks every acknowledged row (read from the
// storage root by a separate reader), pending is 0, and no key is read twice.
func TestWorkerProcessesSurviveKillsAndTemporalRestarts(t *testing.T) {
	testtemporal.SkipShort(t)
	// Parallel with the mixed load: most of this test is waiting (a killed worker's activity
	// is retried after its one-minute heartbeat timeout).
	t.Parallel()
	bin := buildWalkeeper(t)
	dir := t.TempDir()
	srv, c := testtemporal.StartRestartable(t, testtemporal.Options{})
	rig := &temporalRig{srv: srv, c: c}
	faults := rig.faults()
	rounds := pickInt(len(faults), 10, "WALKEEPER_TEMPORAL_ROUNDS")

	storage := "file://" + filepath.Join(dir, "storage")
	common := []string{"--storage", storage, "--temporal", rig.srv.HostPort, "--flush-interval", "0",
		"--merge-after-generations", "0", "--sweep-interval", "0", "--merge-max-generations", "1",
		"--log-format", "json", "--log-level", "info", "--temporal-wait", "2m"}
	workers := []*walkeeperproc.Worker{
		{Bin: bin, Instance: "rel-wa", Log: filepath.Join(dir, "wa.log"), Args: common},
		{Bin: bin, Instance: "rel-wb", Log: filepath.Join(dir, "wb.log"), Args: common},
	}
	for _, w := range workers {
		w.Start(t)
	}
	t.Cleanup(func() {
		for _, w := range workers {
			_, _ = w.Stop(stopGrace)
		}
	})
	api := func(w *walkeeperproc.Worker, rest string) string {
		return "http://" + w.Listen + "/api/v1/stores/generic/wk" + rest
	}
	require.NoError(t, errOf(httpJSON(http.MethodPost, api(workers[0], ""), map[string]any{"fields": Schema.Fields}, nil)))
	load := &rigLoad{oracle: NewOracle(), next: map[string]int64{}}
	wk := store.Target{Kind: store.KindGeneric, Name: "wk"}

	for round := 0; round < rounds; round++ {
		fault := faults[round%len(faults)]
		t.Run(fmt.Sprintf("round%d-%s", round, fault), func(t *testing.T) {
			// Seal 8 generations per worker (each a batch of 40 rows, some keys rewritten).
			for g := 0; g < 8; g++ {
				for wi, w := range workers {
					rows := make([]map[string]any, 40)
					keys := make([]string, 40)
					vals := make([]int64, 40)
					for j := range rows {
						k := fmt.Sprintf("w%d-%04d", wi, (round*8*40+g*40+j*3)%600)
						load.next[k]++
						keys[j], vals[j] = k, load.next[k]
						load.oracle.Attempt(k, vals[j])
						rows[j] = map[string]any{"id": k, "v": vals[j], "pad": "x"}
					}
					require.NoError(t, errOf(httpJSON(http.MethodPost, api(w, "/rows"), rows, nil)))
					for j := range keys {
						load.oracle.Ack(keys[j], vals[j])
					}
					require.NoError(t, errOf(httpJSON(http.MethodPost, api(w, "/flush"), nil, nil)))
				}
			}
			var st store.Stats
			require.NoError(t, errOf(httpJSON(http.MethodGet, api(workers[1], "/stats"), nil, &st)))
			v0 := st.BaseVersion
			var started struct {
				WorkflowID string `json:"workflow_id"`
				RunID      string `json:"run_id"`
			}
			require.NoError(t, errOf(httpJSON(http.MethodPost, api(workers[1], "/merge-wal"), nil, &started)))
			// Wait for the merge to be under way (two commits landed), then inject the fault.
			require.Eventually(t, func() bool {
				var st store.Stats
				_, err := httpJSON(http.MethodGet, api(workers[1], "/stats"), nil, &st)
				return err == nil && st.BaseVersion >= v0+2
			}, 2*time.Minute, 20*time.Millisecond, "the merge never started committing")
			faultAt := time.Now()
			switch fault {
			case "kill-worker":
				victim := workers[round/2%2]
				victim.Kill()
				time.Sleep(300 * time.Millisecond)
				victim.Start(t)
			case "restart-temporal":
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				require.NoError(t, rig.srv.RestartServer(rctx))
				rig.restart++
			case "restart-postgres":
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				require.NoError(t, rig.srv.RestartPersistence(rctx))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			var res contract.MergeWalResult
			if err := rig.c.GetWorkflow(ctx, started.WorkflowID, "").Get(ctx, &res); err != nil {
				t.Fatalf("MergeWal %s did not complete after %s: %v\nworker logs:\n%s\n%s", started.WorkflowID, fault, err,
					workers[0].Output(), workers[1].Output())
			}
			t.Logf("%s: MergeWal completed %s after the fault: passes=%d reclaimed=%d base=%d workflow_runs=%d shards=%+v",
				fault, time.Since(faultAt).Round(time.Millisecond), res.Passes, res.Reclaimed, res.BaseVersion, res.WorkflowRuns, res.Shards)
			for _, sh := range res.Shards {
				assert.Empty(t, sh.Error, "shard %s", sh.Shard)
			}
			verifyRoot(t, storage, wk, load.oracle)
		})
	}
}

// verifyRoot reads the storage root from a fresh, read-only process view and checks the
// oracle, pending 0 and no key twice; leftovers are logged.
func verifyRoot(t *testing.T, storage string, tg store.Target, oracle *Oracle) {
	t.Helper()
	ctx := context.Background()
	db, s, all := readChecked(t, storage, fmt.Sprintf("verifier-%d", time.Now().UnixNano()), tg, oracle, "after the run")
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	if st.TotalPending() != 0 {
		t.Errorf("pending after MergeWal completed: %+v", st.Shards)
	}
	lay, err := InspectLayout(ctx, db.Bucket(), tg)
	require.NoError(t, err)
	t.Logf("verified %d keys; layout: %s", len(all), lay.Summary())
}
