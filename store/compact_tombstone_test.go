package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A compaction must not drop a tombstone that still hides an older row no generation holds
// yet: another writer's row written before the delete and still in its memtable (and WAL)
// is sealed after the compaction, and without the tombstone it would come back.
func TestCompactionKeepsTombstonesOverUnsealedRows(t *testing.T) {
	ctx := context.Background()
	url := newMemURL()
	db1 := openTestDB(t, url, "w1")
	s1 := createGeneric(t, db1, "tomb", false)
	db2 := openTestDB(t, url, "w2")
	s2 := openGeneric(t, db2, "tomb")

	seal(t, s1, row("other", 1))
	_, err := s1.MergeAll(ctx)
	require.NoError(t, err)
	appendRows(t, s2, row("k", 2)) // acknowledged, in w2's memtable and WAL only
	require.NoError(t, s1.Delete(ctx, "k"))
	_, err = s1.Flush(ctx)
	require.NoError(t, err)
	_, err = s1.MergeAll(ctx)
	require.NoError(t, err)
	_, err = s1.Get(ctx, "k")
	require.ErrorIs(t, err, ErrNotFound, "the delete came after the write")

	_, err = s1.CompactBase(ctx, CompactParams{MaxRuns: -1, AttemptKey: "wf/c"})
	require.NoError(t, err)
	_, err = s2.Flush(ctx)
	require.NoError(t, err)
	_, err = s1.Get(ctx, "k")
	require.ErrorIs(t, err, ErrNotFound, "a row older than the delete must not come back")
	_, err = s1.MergeAll(ctx)
	require.NoError(t, err)
	_, err = s1.Get(ctx, "k")
	require.ErrorIs(t, err, ErrNotFound, "a row older than the delete must not come back")
}
