package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Deterministic reproductions of what the randomized tests found. Each one names the store
// code it exercises; docs/RELIABILITY.md ("Findings") has the analysis. All seven were fixed
// in commit 8e3e67b; the reproductions stay as regression tests.

// gate blocks the first bucket call matching (op, key substring) while armed, until released.
type gate struct {
	op, key string
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
	once    atomic.Bool
}

func newGate(op, key string) *gate {
	return &gate{op: op, key: key, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) Before(op, key string) error {
	if g.armed.Load() && (g.op == "" || op == g.op) && strings.Contains(key, g.key) && g.once.CompareAndSwap(false, true) {
		close(g.reached)
		<-g.release
	}
	return nil
}

func (g *gate) After(_, _ string, err error) error { return err }

// TestFindingReadDuringSealSeesAcknowledgedRow: a Get on the writing process must return
// the newest acknowledged version even when a seal completes while the Get is running.
//
// store/read.go getOnce (and listOnce) snapshot the shard manifests and the base first and
// the writer's memtable last. A seal that publishes its manifest after the manifest read and
// drops the sealed memtable before the memtable read makes the row invisible to that read:
// the Get returns the previous version (or not found). Found by TestStorageFaultsMixedLoad's
// read-your-writes check. Proposed fix: take the memtable snapshot (w.snapshot()) BEFORE
// s.snapshot(ctx, ...) in getOnce and listOnce — a row then is either in the memtable copy
// or, if its seal finished first, in a generation the later manifest read lists.
func TestFindingReadDuringSealSeesAcknowledgedRow(t *testing.T) {
	for _, read := range []string{"get", "list"} {
		t.Run(read, func(t *testing.T) {
			ctx := context.Background()
			g := newGate("", "/_versions/") // the read's base-manifest load, after its shard-manifest reads
			db := mustOpenDB(t, memURL(t), "w1", g, nil)
			s := mustStore(t, db)
			mustSeal(t, s, Row("a", 1))
			require.NoError(t, errOf(s.Append(ctx, []store.Row{Row("a", 2)}))) // acknowledged, in the memtable
			g.armed.Store(true)
			got := make(chan string, 1)
			go func() {
				if read == "get" {
					row, err := s.Get(ctx, "a")
					if err != nil {
						got <- err.Error()
						return
					}
					v, _ := ValueOf(row)
					got <- fmt.Sprint(v)
					return
				}
				rows, _, err := ReadAll(ctx, s, store.SourceAll, 100)
				if err != nil {
					got <- err.Error()
					return
				}
				got <- fmt.Sprint(rows["a"])
			}()
			select {
			case <-g.reached:
			case <-time.After(30 * time.Second):
				t.Fatal("timed out waiting for the read to reach the base manifest")
			}
			require.NoError(t, errOf(s.Flush(ctx))) // seals a=2 and drops the memtable
			close(g.release)
			require.Equal(t, "2", <-got, "%s of an acknowledged row during a seal: want the newest acknowledged value", read)
		})
	}
}

// TestFindingRetriedPrepareDoesNotLeakStagedFile: docs/DESIGN.md §3 — "Name staged files from the
// attempt's idempotency key so a retried prepare overwrites instead of leaking".
//
// store/merge.go Prepare names the staged file m-<hash(attempt)>-<shard8>-<from>-<through>.
// When the first try's Put lands but reports failure (or the process dies right after it,
// crash-table row "after prepare wrote the staged file") and a generation is sealed before
// the retry, the retry plans more generations, writes a different name, and the first file
// is never referenced nor deleted. Proposed fix: before its Put, Prepare lists
// data/m-<hash(attempt,target,shard)>- and deletes every other file of the same attempt that
// the latest base does not reference (a zombie of the same attempt can at worst make the
// retry's commit fail with StalePreparation, which re-prepares).
func TestFindingRetriedPrepareDoesNotLeakStagedFile(t *testing.T) {
	ctx := context.Background()
	var ghost atomic.Bool
	faults := objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if err == nil && op == objstore.OpPut && strings.Contains(key, "/data/m-") && ghost.CompareAndSwap(true, false) {
			return fmt.Errorf("put %s landed but reported failure: %w", key, ErrInjected)
		}
		return err
	}}
	db := mustOpenDB(t, memURL(t), "w1", faults, nil)
	s := mustStore(t, db)
	mustSeal(t, s, Row("a", 1))
	mustSeal(t, s, Row("b", 1))
	ghost.Store(true)
	require.ErrorIs(t, errOf(s.Prepare(ctx, store.PrepareParams{AttemptKey: "merge-wal/generic/rel/prepare-1"})), ErrInjected, "first prepare")
	mustSeal(t, s, Row("c", 1)) // a seal lands before the activity is retried
	p, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: "merge-wal/generic/rel/prepare-1"})
	require.NoError(t, err)
	require.NoError(t, errOf(commitOne(ctx, s, p)))
	lay, err := InspectLayout(ctx, db.Bucket().WithFaults(nil), target)
	require.NoError(t, err)
	require.Empty(t, lay.Orphans, "the retried prepare (same attempt key) left the first try's staged file behind (referenced: %v)", lay.Runs)
}

// TestFindingAlreadyCommittedCleanupFailureIsReported: when a commit finds its generations
// already committed by another attempt, it deletes its own staged file; if that delete
// fails, Commit still returns success and nobody ever deletes the file.
//
// store/merge.go Commit → dropUnreferencedStaged ignores the Delete (and loadBase) errors.
// Two attempts for the same generations happen when a shard-queue prepare times out and
// the workflow falls back to another worker while the first is still running. Proposed fix:
// let dropUnreferencedStaged return its error and have Commit return it (before deleting
// the claim), so the retried Commit repeats the idempotent "already committed → drop" path.
func TestFindingAlreadyCommittedCleanupFailureIsReported(t *testing.T) {
	ctx := context.Background()
	var failDeletes atomic.Bool
	faults := objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if failDeletes.Load() && op == objstore.OpDelete && strings.Contains(key, "/data/m-") {
			return fmt.Errorf("delete %s: %w", key, ErrInjected)
		}
		return nil
	}}
	db := mustOpenDB(t, memURL(t), "w1", faults, nil)
	s := mustStore(t, db)
	for i := 0; i < 2; i++ {
		mustSeal(t, s, Row(fmt.Sprint("k", i), 1))
	}
	p1, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: "owner"})
	require.NoError(t, err)
	p2, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: "fallback"})
	require.NoError(t, err)
	require.NoError(t, errOf(commitOne(ctx, s, p1)))
	failDeletes.Store(true)
	res, err := commitOne(ctx, s, p2)
	failDeletes.Store(false)
	lay, lerr := InspectLayout(ctx, db.Bucket().WithFaults(nil), target)
	require.NoError(t, lerr)
	if err == nil && len(lay.Orphans) > 0 {
		t.Fatalf("Commit reported success (already committed=%v) but left its staged file %v: the failed clean-up is never retried", res.Outcome == store.RoundAlreadyCommitted, lay.Orphans)
	}
}

// TestFindingSelfFenceHidesAcknowledgedRows: a WAL write that lands but reports failure
// makes the writer fence itself, and until a replacement writer has replayed the WAL, the
// process's own reads do not see rows it acknowledged before.
//
// store/wal_commit.go walGroupCommit: after an ambiguous WAL put error nextPos is not advanced; the next
// batch's put-if-absent at the same position finds the landed object with other bytes and
// kills the writer as fenced (no other process exists). store/store.go residentWriter
// returns nil for a dead writer, so store/read.go getOnce/listOnce skip its memtable, which
// still holds acknowledged rows that are only in the WAL. If opening the replacement fails
// (here: its claim manifest write fails), the rows stay invisible to this process until the
// next successful append or flush. Proposed fix: (1) in writer.commit, retry the WAL put on
// an error that is not ErrAlreadyExists (the existing same-bytes check turns a landed put
// into success), so an ambiguous outcome is not mistaken for a fence; (2) let reads include
// the memtable of the store's last writer even when it is dead, until a replacement has
// replayed the WAL (its rows are durable and acknowledged; newest-sequence-wins keeps any
// newer version from another owner on top).
func TestFindingSelfFenceHidesAcknowledgedRows(t *testing.T) {
	ctx := context.Background()
	var ghostWAL, failClaim atomic.Bool
	faults := objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			if op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && failClaim.Load() {
				return fmt.Errorf("put_if_absent %s: %w", key, ErrInjected)
			}
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if err == nil && op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") && ghostWAL.CompareAndSwap(true, false) {
				return fmt.Errorf("put_if_absent %s landed but reported failure: %w", key, ErrInjected)
			}
			return err
		},
	}
	db := mustOpenDB(t, memURL(t), "w1", faults, nil)
	s := mustStore(t, db)
	require.NoError(t, errOf(s.Append(ctx, []store.Row{Row("a", 1)})))
	ghostWAL.Store(true)
	require.ErrorIs(t, errOf(s.Append(ctx, []store.Row{Row("b", 1)})), ErrInjected, "want the injected WAL failure")
	failClaim.Store(true)
	_, err := s.Append(ctx, []store.Row{Row("c", 1)})
	failClaim.Store(false)
	t.Logf("append after the ambiguous WAL write: %v", err)
	row, err := s.Get(ctx, "a")
	require.NoError(t, err, "acknowledged row a=1 is not readable on its own process")
	v, _ := ValueOf(row)
	require.EqualValues(t, 1, v, "a")
}

// TestFindingMissingRunIsNotRowNotFound: when a file that the latest base manifest lists is
// gone (lost object, operator mistake, a clean-up bug), reads must say the store is damaged,
// not that the row does not exist.
//
// store/read.go Get/List retry three times on a file-level ErrNotFound ("a file vanished
// under a concurrent merge") and then return that error, which still wraps ErrNotFound, so
// worker/http_rows.go getRow answers 404 row_not_found for a row that exists in the base, and
// walkeeper_corrupt_objects_total does not move. Proposed fix: after the last attempt,
// return corruptf("%s referenced by the manifest is missing", path) (and count it), so the
// data plane answers 500 corrupt.
func TestFindingMissingRunIsNotRowNotFound(t *testing.T) {
	ctx := context.Background()
	db := mustOpenDB(t, memURL(t), "w1", nil, nil)
	s := mustStore(t, db)
	mustSeal(t, s, Row("a", 1))
	require.NoError(t, errOf(s.MergeAll(ctx)))
	lay, err := InspectLayout(ctx, db.Bucket(), target)
	require.NoError(t, err)
	require.Len(t, lay.Runs, 1)
	require.NoError(t, db.Bucket().Delete(ctx, lay.Runs[0])) // the object is lost
	reader := mustStore(t, mustOpenDB(t, db.Bucket().URL(), "reader", nil, nil))
	_, err = reader.Get(ctx, "a")
	require.ErrorIs(t, err, store.ErrCorrupt, "get of a row whose base run is missing: want HTTP 500 corrupt")
	require.NotErrorIs(t, err, store.ErrNotFound, "get of a row whose base run is missing: not HTTP 404 row_not_found")
}

// TestFindingHostileManifestPathIsCorrupt: a base manifest whose run path is not a valid key
// of the store (here "../x") is damaged data; reads must fail with ErrCorrupt.
//
// store/format.go / store.go loadBase (and loadShard for generation paths) accept any path;
// the bucket's key check then rejects it with ErrInvalidInput, which the data plane maps to
// 400 invalid_input — blaming the client for a damaged store. Proposed fix: in loadBase and
// loadShard, check every run/generation path is a valid key under the store's data/ (or the
// shard's gen/) prefix and return corruptf otherwise. Found by FuzzBaseManifest's seeds.
func TestFindingHostileManifestPathIsCorrupt(t *testing.T) {
	ctx := context.Background()
	db := mustOpenDB(t, memURL(t), "w1", nil, nil)
	s := mustStore(t, db)
	raw := `{"version":1,"runs":[{"id":"x","path":"../x.parquet","rows":1,"min_key":"a","max_key":"z"}],"watermarks":{}}`
	require.NoError(t, db.Bucket().PutIfAbsent(ctx, target.Path()+"/_versions/00000000000000000001.json", []byte(raw)))
	_, err := s.Get(ctx, "b")
	require.ErrorIs(t, err, store.ErrCorrupt, "get over a manifest naming ../x.parquet: not ErrInvalidInput (HTTP 400)")
}

// TestFindingStaleChainHintCatchesUpOnFlakyStorage: a process whose cached view of a shard's
// manifest chain is many versions behind must still be able to read when storage fails now
// and then.
//
// store/format.go chain.latest walks forward from its cached hint with one Get per version
// (v+1, v+2, …) and stores the new hint only when the whole walk succeeded. On storage that
// fails a small fraction of calls, a hint N versions behind needs N consecutive successful
// Gets; every retry starts again from the same stale hint, so once N is large the handle
// never catches up. Found by TestStorageFaultsMixedLoad on file:// (a merger's Commit kept
// failing in the drain's loadShard for 2 minutes). It also costs a healthy read N sequential
// GETs (here ~200; up to 256 before version collection forces a relist). Proposed fix: in
// latest(), advance c.hint/c.hintRaw after every successful probe, and switch to
// listLatest (one List) once the walk passes a few versions.
func TestFindingStaleChainHintCatchesUpOnFlakyStorage(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	var gets, failEvery atomic.Int64
	faults := objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.Contains(key, "/manifest/") {
			n := gets.Add(1)
			if f := failEvery.Load(); f > 0 && n%f == 0 {
				return fmt.Errorf("get %s: %w", key, ErrInjected)
			}
		}
		return nil
	}}
	writerDB := mustOpenDB(t, url, "writer", nil, nil)
	w := mustStore(t, writerDB)
	require.NoError(t, errOf(w.Append(ctx, []store.Row{Row("a", 1)})))
	reader := mustStore(t, mustOpenDB(t, url, "reader", faults, nil))
	require.NoError(t, errOf(reader.Stats(ctx))) // caches the writer's chain at its first version
	for i := 0; i < 200; i++ {                   // the writer's shard manifest moves 200 versions on
		mustSeal(t, w, Row("a", int64(i+2)))
	}
	failEvery.Store(50) // 2% of manifest reads fail
	gets.Store(0)
	var lastErr error
	for attempt := 1; attempt <= 20; attempt++ {
		if _, lastErr = reader.Stats(ctx); lastErr == nil {
			t.Logf("caught up on attempt %d after %d manifest GETs", attempt, gets.Load())
			return
		}
	}
	t.Fatalf("20 reads in a row failed (%d manifest GETs, every 50th failing): the chain hint never advances past a failure: %v", gets.Load(), lastErr)
}
