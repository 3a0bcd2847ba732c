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

// TestFindingReadDuringSealSeesAcknowledgedRow: a Get or a listing on the writing process
// returns the newest acknowledged version even when a seal completes while it runs.
//
// store/read.go getOnce (and listOnce) read the manifests first and the writer's memtable
// last, so a seal publishing its manifest and dropping its memtable between the two hid the
// row (the read returned the previous version, or not found). They now take the memtable
// first: a row is in that copy or in a generation the later manifest read lists. Found by
// TestStorageFaultsMixedLoad's read-your-writes check.
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
// When the first try's Put landed but reported failure (or the process died right after it)
// and a generation was sealed before the retry, the retry wrote another name and the first
// file was never referenced nor deleted. Prepare now deletes what earlier tries of its
// attempt staged that no commit can publish any more (dropLeakedStaged).
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
// store/merge.go Commit → dropUnreferencedStaged ignored the Delete (and loadBase) errors.
// Two attempts for the same generations happen when a shard-queue prepare times out and
// the workflow falls back to another worker while the first is still running.
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
// store/wal_commit.go walGroupCommit: after an ambiguous WAL put error the next batch's
// put-if-absent at the same position finds the landed object with other bytes and kills the
// writer as fenced (no other process exists). Reads skipped a dead writer's memtable, which
// still holds acknowledged rows that are only in the WAL, and when opening the replacement
// failed too (here: its claim manifest write fails), the rows stayed invisible. Reads now
// use the last writer's memtable until a replacement has replayed the WAL.
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
// under a concurrent merge"); they returned that error, so worker/http_rows.go getRow
// answered 404 row_not_found for a row that exists in the base, and
// walkeeper_corrupt_objects_total did not move. Now the last attempt's error is ErrCorrupt,
// counted, and the data plane answers 500 corrupt.
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
// store/format.go / store.go loadBase (and loadShard for generation paths) accepted any
// path, and the bucket's key check rejected it with ErrInvalidInput, which the data plane
// maps to 400 invalid_input, blaming the client for a damaged store; a path outside data/
// (or the shard's gen/) is now ErrCorrupt. Found by FuzzBaseManifest's seeds.
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
// store/format.go chain.latest walked forward from its cached hint with one Get per version
// (v+1, v+2, …) and stored the new hint only when the whole walk succeeded: on storage that
// fails a small fraction of calls, a hint N versions behind needed N successful Gets in a
// row, every retry starting from the same stale hint, so once N was large the handle never
// caught up. Found by TestStorageFaultsMixedLoad on file:// (a merger's Commit kept failing
// in the drain's loadShard for 2 minutes).
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
