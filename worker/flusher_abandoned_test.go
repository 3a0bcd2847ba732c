package worker

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

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
	sw := NewFlusher(FlusherOptions{Interval: time.Hour, Timeout: 20 * time.Millisecond, MergeAfterGenerations: 1,
		Start: rs.start, Logger: zaptest.NewLogger(t), Resident: db.Resident,
		Flush: func(ctx context.Context, s *store.Store) (store.FlushResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return store.FlushResult{}, ctx.Err()
			}
			return s.Flush(ctx)
		}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sw.Stop(ctx); err != nil {
			t.Error(err)
		}
	})

	sw.FlushKind(context.Background(), store.KindGeneric) // abandoned after 20ms
	if rs.count() != 0 {
		t.Fatal("a start before the seal completed")
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for rs.count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned seal completed with 1 pending generation and no merge was started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sw.triggers.wg.Wait()
	if rs.count() != 1 {
		t.Fatalf("starts = %d, want 1", rs.count())
	}
}
