package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// A debt kick that other stores' starts crowded out of every slot is not spent: the next
// refused write starts the merge, instead of the store waiting debtKickEvery with its
// writers refused.
func TestDebtKickCrowdedOutTriesAgain(t *testing.T) {
	m := NewMetrics(nil)
	_, _, ge := testDB(t, m)
	release := make(chan struct{})
	var mu sync.Mutex
	var started []string
	start := func(_ context.Context, tg store.Target, _ contract.MergeWalInput, _ ...contract.StartOption) (client.WorkflowRun, error) {
		mu.Lock()
		started = append(started, tg.String())
		mu.Unlock()
		if tg != ge.Target() {
			<-release // the other stores' starts hold their slots
		}
		return &fakeRun{id: "merge-wal/" + tg.Path(), runID: "run-1"}, nil
	}
	sw := testFlusher(t, FlusherOptions{Start: start, Metrics: m, Resident: func() []*store.Store { return nil }})
	for i := range maxStartsInFlight {
		if !sw.triggers.fire(TriggerDebt, store.Target{Kind: store.KindGeneric, Name: fmt.Sprintf("busy%d", i)}, 1, "busy") {
			t.Fatalf("start %d did not launch", i)
		}
	}
	a := &apiServer{triggers: sw.triggers}
	a.kicks.every = debtKickEvery

	a.kickIfRefused(ge, store.ErrTooManyPending) // every slot is taken
	close(release)
	sw.triggers.wg.Wait()
	a.kickIfRefused(ge, store.ErrTooManyPending) // a moment later, well within debtKickEvery
	sw.triggers.wg.Wait()

	startedSoFar := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(started)
	}
	if !slices.Contains(startedSoFar(), ge.Target().String()) {
		t.Fatalf("the refused store's merge was never started: %v", startedSoFar())
	}
	a.kickIfRefused(ge, store.ErrTooManyPending) // a kick that launched is spent
	sw.triggers.wg.Wait()
	if n := len(startedSoFar()); n != maxStartsInFlight+1 {
		t.Fatalf("%d starts, want %d: a launched kick must wait debtKickEvery", n, maxStartsInFlight+1)
	}
}
