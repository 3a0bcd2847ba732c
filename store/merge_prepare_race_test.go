package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// A Prepare that planned against a base another attempt then published over, and whose
// generations that attempt's finish deleted before it read them (the commit of a cancelled
// MergeWal run, still running, beside the next run's Prepare), fails with a retryable
// ErrConflict, not ErrNotFound: the workflow records NotFound as a permanent failure of the
// shard. Its retry plans against the new watermark.
func TestPrepareRacingAnotherAttemptsCommitIsRetryable(t *testing.T) {
	ctx := context.Background()
	f := newRoundFixture(t, fmt.Sprintf("mem://prepare-race-%d", testURLSeq.Add(1)), 1, 3)
	w := f.writers[0]
	shard := w.db.Shard()
	two := 2
	a := call(w.Prepare(ctx, PrepareParams{AttemptKey: "run-a/1", MaxGenerations: &two})).must(t)

	// Run B's Prepare (on the shared worker's store) has planned when run A's commit lands.
	var once sync.Once
	var commitErr error
	ff := objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.Contains(key, genPrefix(w.target, shard)) {
			once.Do(func() { _, commitErr = commitOne(ctx, w, a) })
		}
		return nil
	}}
	f.faults.Store(&ff)
	_, err := f.committer.Prepare(ctx, PrepareParams{Shard: shard, AttemptKey: "run-b/1"})
	f.faults.Store(nil)
	require.NoError(t, commitErr)
	require.ErrorIs(t, err, ErrConflict)
	require.NotErrorIs(t, err, ErrNotFound, "a permanent failure of the shard for its run")

	// The retry prepares what is left.
	b := call(f.committer.Prepare(ctx, PrepareParams{Shard: shard, AttemptKey: "run-b/1"})).must(t)
	require.NotNil(t, b)
	require.Equal(t, []uint64{3}, b.Generations)
}
