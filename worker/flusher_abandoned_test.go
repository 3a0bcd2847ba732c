package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
)

// A seal abandoned after --flush-timeout that then completes still runs the count trigger:
// its result was dropped, and the next pass of an idle store seals nothing, so on storage
// where every seal outlasts the timeout the count trigger never fired.
func TestAbandonedSealStillRunsTheCountTrigger(t *testing.T) {
	db, _, ge := testDB(t, nil)
	appendIDs(t, ge, "g1")
	release := make(chan struct{})
	rs := &recStarter{}
	sw := testFlusher(t, FlusherOptions{Timeout: 20 * time.Millisecond, MergeAfterGenerations: 1, Start: rs.start, Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return store.FlushResult{}, ctx.Err()
			}
			return s.Flush(ctx)
		}})
	sw.FlushKind(context.Background(), store.KindGeneric) // abandoned after 20ms
	if rs.count() != 0 {
		t.Fatal("a start before the seal completed")
	}
	close(release)
	require.Eventually(t, func() bool { return rs.count() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the abandoned seal completed with 1 pending generation and no merge was started")
	sw.triggers.wg.Wait()
	if rs.count() != 1 {
		t.Fatalf("starts = %d, want 1", rs.count())
	}
}
