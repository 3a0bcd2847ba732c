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
	_, err := s.Flush(ctx)
	require.ErrorIs(t, err, ErrFenced)
	require.False(t, armed.Load(), "the successor claimed")

	_, err = successor.Flush(ctx)
	require.NoError(t, err)
	reader := openGeneric(t, openTestDB(t, url, "r"), "fenced")
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, reader, SourceAll), "the acknowledged rows are read")
	_, err = reader.MergeAll(ctx)
	require.NoError(t, err)
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
	_, err := s.Flush(ctx)
	require.ErrorIs(t, err, ErrStalled)
	appendRows(t, s, row("c", 3))
	res, err := s.Flush(ctx)
	require.NoError(t, err)
	require.True(t, landed.Load(), "the abandoned put landed after the retry's")
	require.Equal(t, 3, res.Rows)

	reader := openGeneric(t, openTestDB(t, url, "r"), "late")
	want := map[string]int64{"a": 1, "b": 2, "c": 3}
	require.Equal(t, want, allRows(t, reader, SourceAll))
	_, err = reader.MergeAll(ctx)
	require.NoError(t, err)
	require.Equal(t, want, allRows(t, reader, SourceBase))
	there, err := raw.Exists(ctx, abandoned)
	require.NoError(t, err)
	require.False(t, there, "the merge that passed its number deleted the late file")
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
			res, err := s.Flush(ctx)
			require.NoError(t, err)
			require.False(t, armed.Load(), "the fault fired")
			pending := 1
			if merged {
				pending = 0
			}
			require.Equal(t, FlushResult{Sealed: true, Generation: 1, Rows: 2, Pending: pending}, res)

			sm, err := s.loadShard(ctx, db.shard)
			require.NoError(t, err)
			require.Len(t, sm.Flushed, pending, "the rows are sealed once")
			gens, err := db.listGenerations(ctx, s.target, db.shard)
			require.NoError(t, err)
			require.Len(t, gens, pending)
			require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, s, SourceAll))
		})
	}
}
