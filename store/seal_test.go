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
