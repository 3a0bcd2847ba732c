package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// A compaction that runs, whole, between a seal's demand record and the shard manifest that
// publishes its generation clears only the store's compaction marker: the generation's record
// stays, so the sweep still finds the store in debt. Compaction deletes its inputs, outputs and
// the marker, never a key under a shard's demand prefix.
func TestCompactionDuringASealKeepsTheGenerationsDemandRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, s := newGenericStore(t, backends(t)["mem"], "sealcompact", func(o *Options) { o.CompactDemandRuns = 2 })
	for i := range 3 {
		seal(t, s, row(string(rune('a'+i)), 1))
		call(s.MergeOnce(ctx, db.shard)).must(t)
	}
	require.True(t, keyExists(t, db, demandCompactMarker(s.target)))

	var armed atomic.Bool
	paused, resume := make(chan struct{}), make(chan struct{})
	manifests := shardManifestPrefix(s.target, db.shard)
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if (op == objstore.OpPut || op == objstore.OpPutIfAbsent) && strings.HasPrefix(key, manifests) && armed.CompareAndSwap(true, false) {
			close(paused)
			<-resume
		}
		return nil
	}})
	appendRows(t, s, row("p", 2))
	armed.Store(true)
	sealed := make(chan error, 1)
	go func() { _, err := s.Flush(ctx); sealed <- err }()
	select {
	case <-paused:
	case err := <-sealed:
		t.Fatalf("the seal ended before publishing its manifest: %v", err)
	case <-ctx.Done():
		t.Fatal("the seal never reached its manifest")
	}
	recs := demandOf(t, db, s.target)
	require.Len(t, recs, 1, "the seal wrote its record before its manifest")

	res := call(s.CompactBase(ctx, CompactParams{})).must(t)
	require.True(t, res.Committed)
	require.Less(t, res.RunsLeft, 2)
	close(resume)
	require.NoError(t, <-sealed)

	require.False(t, keyExists(t, db, demandCompactMarker(s.target)), "the compaction cleared the marker")
	require.Equal(t, 1, call(s.Stats(ctx)).must(t).Shards[0].PendingGenerations)
	require.Equal(t, recs, demandOf(t, db, s.target), "the pending generation keeps its demand record")
}

// A compaction or a reconcile that clears the compaction marker read the base before a merge
// brought it back to CompactDemandRuns runs; when that merge writes the marker just before
// the clearing delete, the marker must survive it, else the CompactBase trigger waits for the
// next merge commit or reconcile. The merge runs while the delete is held at the storage.
func TestFindingClearingTheCompactionMarkerKeepsAConcurrentMergesMarker(t *testing.T) {
	for _, clearer := range []string{"compaction", "reconcile"} {
		t.Run(clearer, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, s := newGenericStore(t, backends(t)["mem"], "markerrace", func(o *Options) { o.CompactDemandRuns = 2 })
			for i := range 3 {
				seal(t, s, row(string(rune('a'+i)), 1))
				call(s.MergeOnce(ctx, db.shard)).must(t)
			}
			if clearer == "reconcile" {
				res := call(s.CompactBase(ctx, CompactParams{})).must(t)
				require.Equal(t, 1, res.RunsLeft)
				require.NoError(t, s.putCompactDemand(ctx, 3), "a stale marker, as a failed clearing leaves")
			}
			seal(t, s, row("p", 2)) // what the concurrent merge folds

			marker := demandCompactMarker(s.target)
			var armed atomic.Bool
			paused, resume := make(chan struct{}), make(chan struct{})
			db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
				if op == objstore.OpDelete && key == marker && armed.CompareAndSwap(true, false) {
					close(paused)
					<-resume
				}
				return nil
			}})
			armed.Store(true)
			cleared := make(chan error, 1)
			go func() {
				if clearer == "compaction" {
					res, err := s.CompactBase(ctx, CompactParams{})
					if err == nil && res.RunsLeft != 1 {
						err = fmt.Errorf("the compaction left %d runs, want 1", res.RunsLeft)
					}
					cleared <- err
					return
				}
				_, err := s.ReconcileDemand(ctx)
				cleared <- err
			}()
			select {
			case <-paused:
			case err := <-cleared:
				t.Fatalf("the %s ended without clearing the marker: %v", clearer, err)
			case <-ctx.Done():
				t.Fatalf("the %s never cleared the marker", clearer)
			}
			require.Equal(t, RoundCommitted, call(s.MergeOnce(ctx, db.shard)).must(t).Outcome)
			close(resume)
			require.NoError(t, <-cleared)

			base := call(s.loadBase(ctx)).must(t)
			require.Len(t, base.Runs, 2)
			require.True(t, keyExists(t, db, marker), "the base holds 2 runs: the marker the merge wrote must stay")
		})
	}
}
