package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// TestFindingFencedSealKeepsTheGenerationItsLandedVersionLists: a seal's manifest version
// lands but its writer is told AlreadyExists (an SDK retry of the landed put-if-absent), and
// a new owner of the shard claims it before the writer reads the manifest again. The writer is
// fenced; the generation it wrote is listed by its landed version and by the new owner's
// claim, whose replay starts after the WAL that generation sealed, so deleting it as the
// unpublished file of a fenced seal lost acknowledged rows and left the shard's manifest
// naming a missing object.
func TestFindingFencedSealKeepsTheGenerationItsLandedVersionLists(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	owner := openTestDB(t, url, "w")
	s := createGeneric(t, owner, "fenced", false)
	appendRows(t, s, row("a", 1), row("b", 2))

	successor := openGeneric(t, openTestDB(t, url, "w"), "fenced") // the same instance id
	var armed atomic.Bool
	owner.bucket = owner.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && err == nil && armed.CompareAndSwap(true, false) {
			_, cerr := successor.writer(ctx) // claims the shard after the seal's version
			require.NoError(t, cerr)
			return fmt.Errorf("injected: a retry of the landed put: %w", ErrAlreadyExists)
		}
		return err
	}})
	armed.Store(true)
	require.ErrorIs(t, errOf(s.Flush(ctx)), ErrFenced)
	require.False(t, armed.Load(), "the successor claimed")

	flush(t, successor)
	reader := openGeneric(t, openTestDB(t, url, "r"), "fenced")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, reader, SourceAll), "the acknowledged rows are read")
	call(reader.MergeAll(ctx)).must(t)
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, reader, SourceBase))
}

// TestFindingLateGenerationPutDoesNotReplaceTheRetry: a seal's generation put is abandoned
// (ErrStalled) but the server completes it after the next seal's put, as an S3-like server
// can. The next seal reused the generation's name with more rows, so the late bytes replaced
// the listed generation: its checksum no longer matched and its key range read ErrCorrupt.
// Now the retry takes the next number, and the merge that passes the gap deletes the late file.
func TestFindingLateGenerationPutDoesNotReplaceTheRetry(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db := openTestDB(t, url, "w")
	s := createGeneric(t, db, "late", false)
	appendRows(t, s, row("a", 1), row("b", 2))

	raw := db.bucket
	var abandoned string
	var late []byte
	var landed atomic.Bool
	db.bucket = raw.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op != objstore.OpPut || !strings.Contains(key, "/gen/") || err != nil {
			return err
		}
		if abandoned == "" {
			// The put is abandoned before it lands: keep its bytes to land later.
			b, gerr := raw.Get(ctx, key)
			require.NoError(t, gerr)
			require.NoError(t, raw.Delete(ctx, key))
			abandoned, late = key, b
			return fmt.Errorf("injected: abandoned put: %w", ErrStalled)
		}
		if landed.CompareAndSwap(false, true) {
			require.NoError(t, raw.Put(ctx, abandoned, late)) // lands after the retry's put
		}
		return err
	}})
	require.ErrorIs(t, errOf(s.Flush(ctx)), ErrStalled)
	appendRows(t, s, row("c", 3))
	res := flush(t, s)
	require.True(t, landed.Load(), "the abandoned put landed after the retry's")
	require.Equal(t, 3, res.Rows)

	reader := openGeneric(t, openTestDB(t, url, "r"), "late")
	want := map[string]int64{"a": 1, "b": 2, "c": 3}
	require.Equal(t, want, allRows(t, reader, SourceAll))
	call(reader.MergeAll(ctx)).must(t)
	require.Equal(t, want, allRows(t, reader, SourceBase))
	require.False(t, onStorage(t, raw, abandoned), "the merge that passed its number deleted the late file")
}

// TestFindingSealWhoseVersionLandedPublishesItOnce: a seal's manifest version lands but its
// put-if-absent reports AlreadyExists (an SDK retry of the landed put). The seal read the
// manifest again, found its own epoch and published the same rows once more as the next
// generation; now it sees its generation listed, or passed by a merge that drained it
// meanwhile, and returns that version.
func TestFindingSealWhoseVersionLandedPublishesItOnce(t *testing.T) {
	for _, merged := range []bool{false, true} {
		t.Run(fmt.Sprintf("merged=%v", merged), func(t *testing.T) {
			ctx := context.Background()
			url := newMemURL()
			db := openTestDB(t, url, "w")
			s := createGeneric(t, db, "landed", false)
			appendRows(t, s, row("a", 1), row("b", 2))
			merger := openGeneric(t, openTestDB(t, url, "m"), "landed")

			var armed atomic.Bool
			db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && err == nil && armed.CompareAndSwap(true, false) {
					if merged {
						_, merr := merger.MergeAll(ctx)
						require.NoError(t, merr)
					}
					return fmt.Errorf("injected: a retry of the landed put: %w", ErrAlreadyExists)
				}
				return err
			}})
			armed.Store(true)
			res := flush(t, s)
			require.False(t, armed.Load(), "the fault fired")
			pending := 1
			if merged {
				pending = 0
			}
			require.Equal(t, FlushResult{Sealed: true, Generation: 1, Rows: 2, Pending: pending}, res)

			require.Len(t, call(s.loadShard(ctx, db.shard)).must(t).Flushed, pending, "the rows are sealed once")
			gens := call(db.listGenerations(ctx, s.target, db.shard)).must(t)
			require.Len(t, gens, pending)
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceAll))
		})
	}
}

// TestFindingFencedWritersGapFileIsDeleted: a writer's seal failed before its generation put
// landed and its next seal, numbered past that gap (decision 0631), failed after; then a new
// claim fenced the writer. The new owner numbers from the shard's next_generation, which the
// failed seals never raised, so its seals and every merge after them stopped below the dead
// writer's number and nothing deleted that file. A merge now deletes the unlisted files of an
// older writer epoch whatever their number, and keeps the current writer's above its watermark
// (a seal in flight between its put and its manifest).
func TestFindingFencedWritersGapFileIsDeleted(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	owner := openTestDB(t, url, "w")
	s := createGeneric(t, owner, "gap", false)
	appendRows(t, s, row("a", 1))

	raw := owner.bucket
	var genPuts, demandPuts atomic.Int32
	fail := objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		switch {
		case op == objstore.OpPut && strings.Contains(key, "/gen/") && genPuts.Add(1) == 1:
			return fmt.Errorf("injected: the put never reached storage")
		case op == objstore.OpPut && strings.HasPrefix(key, demandDir+"/") && demandPuts.Add(1) == 1:
			return fmt.Errorf("injected: the demand record after the generation failed")
		}
		return nil
	}}
	owner.bucket = raw.WithFaults(fail)
	_, err := s.Flush(ctx) // generation 1: its put failed
	require.Error(t, err)
	_, err = s.Flush(ctx) // generation 2: its put landed, its demand record failed
	require.Error(t, err)
	owner.bucket = raw
	gap := genKey(s.target, owner.shard, 2, 1)
	require.True(t, onStorage(t, raw, gap), "the second failed seal left %s", gap)

	successor := openGeneric(t, openTestDB(t, url, "w"), "gap") // the same instance id: it fences s
	appendRows(t, successor, row("b", 2))
	res := flush(t, successor)
	require.Equal(t, uint64(1), res.Generation, "the new owner numbers from next_generation")

	// The successor's own seal fails after its put: a file of the current epoch above the
	// watermark, which a merge must keep (it may be a seal between its put and its manifest).
	successor.db.bucket = successor.db.bucket.WithFaults(failOn(fmt.Errorf("injected: the demand record after the generation failed"), func(op, key string) bool {
		return op == objstore.OpPut && strings.HasPrefix(key, demandDir+"/")
	}))
	appendRows(t, successor, row("c", 3))
	require.Error(t, errOf(successor.Flush(ctx)))
	inFlight := genKey(s.target, owner.shard, 2, 2)

	reader := openGeneric(t, openTestDB(t, url, "r"), "gap")
	require.NoError(t, errOf(reader.MergeAll(ctx))) // merges generation 1 only
	require.False(t, onStorage(t, raw, gap), "the merge deleted the fenced writer's gap file %s", gap)
	require.True(t, onStorage(t, raw, inFlight), "the merge kept the current writer's unlisted file %s", inFlight)

	successor.db.bucket = raw
	res = flush(t, successor)
	require.Equal(t, uint64(3), res.Generation, "the retry numbers past its own gap")
	call(reader.MergeAll(ctx)).must(t)
	require.Empty(t, listKeys(t, raw, genPrefix(s.target, owner.shard)), "every generation file is merged or deleted")
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, reader, SourceBase))
}
