package integration

import (
	"fmt"
	"testing"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
)

// historyCost counts one run's billable actions from its real history (internal/actioncount).
func (e *env) historyCost(id, runID string) actioncount.Cost {
	e.t.Helper()
	return actioncount.Events(e.history(e.t, id, runID))
}

// Budgets of a happy-path MergeWal, from real histories on the dev server. A pass is its
// Prepare and its CommitRound (at most 3 actions per shard pass, no timers); a run adds a
// fixed overhead: the start, the first and the confirming listing (the local activities of a
// workflow task: one action each) and the outcome's upsert: 4, one more for a relisting by
// time on a loaded machine. A one-shard run of one pass is at most 6 actions.
const (
	maxActionsPerPass = 3
	maxEventsPerPass  = 13
	maxRunOverhead    = 5
	// maxOneShardRun is the whole bill of a one-shard, one-pass merge started by
	// contract.StartMergeWal (which sets the search attributes at start).
	maxOneShardRun = 6
	// maxUpsertsPerRun: the outcome (WalPendingAtStart, WalReclaimed, WalBytesMerged,
	// WalPending) at the end, nothing else: the start sets the rest.
	maxUpsertsPerRun = 1
)

// TestMergeWalActionsPerPass runs happy-path merges of one and two shards against the real
// server, one generation per pass, counts each history's actions and events, and derives
// the cost of one more pass from runs with more passes: it fails if a pass grows beyond its
// Prepare and CommitRound (plus a listing when a run outlives relistInterval on a loaded
// machine), if any timer or upsert besides the outcome shows up, if a one-shard run of one
// pass costs more than maxOneShardRun, or if the run's own count (MergeWalResult.Actions)
// differs from its history's. A run in which Temporal ran a task again is measured anew
// on a new store, up to three times.
func TestMergeWalActionsPerPass(t *testing.T) {
	e := newEnv(t)
	wa := e.startWorker(e.config("act-a"))
	wb := e.startWorker(e.config("act-b"))
	one := ptr(1)

	type run struct {
		name   string
		target string
		shards int
		gens   int
	}
	// measureOnce merges r's stores once; disturbed is true when Temporal ran a task again (an
	// activity or a workflow task lost in delivery on a loaded server, retried after its
	// timeout): such a run is not the happy path the budgets are for, and a retry that no
	// signal announced is in the history's count but not in the run's own (MergeWalResult.Actions).
	measureOnce := func(r run) (c actioncount.Cost, passes int, disturbed bool) {
		t.Helper()
		sa := e.createStore(wa.DB(), r.target)
		e.writeGenerations(sa, r.name+"a", r.gens, 3)
		if r.shards == 2 {
			sb := e.createStore(wb.DB(), r.target)
			e.writeGenerations(sb, r.name+"b", r.gens, 3)
		}
		wr := e.startMerge(r.target, contract.MergeWalInput{MaxGenerations: one})
		res := e.mergeResult(wr, waitLong)
		if want := r.shards * r.gens; res.Reclaimed != want || res.Passes != want {
			t.Fatalf("%s: reclaimed %d in %d passes, want %d in %d: %+v", r.name, res.Reclaimed, res.Passes, want, want, res)
		}
		c = e.historyCost(wr.GetID(), wr.GetRunID())
		t.Logf("%s: %d shard(s) × %d generation(s): %d passes, %d events, %d actions (%d activities, %d retried, %d local-activity tasks, %d upserts, %d timers, %d signals; %d workflow tasks timed out); the run counted %d",
			r.name, r.shards, r.gens, res.Passes, c.Events, c.Actions, c.Activities, c.Retries, c.LocalActivityTasks, c.Upserts, c.Timers, c.Signals, c.WorkflowTaskTimeouts, res.Actions)
		if c.Retries+c.WorkflowTaskTimeouts > 0 {
			return c, res.Passes, true
		}
		if listings := c.ActivitiesByType[contract.ListPendingShardsActivity]; listings != 0 || c.LocalActivityTasks < 2 {
			t.Errorf("%s: %d ListPendingShards activities and %d local-activity tasks, want none and the first and confirming listing", r.name, listings, c.LocalActivityTasks)
		}
		if c.Timers != 0 {
			t.Errorf("%s: %d timers in a happy-path merge, want none", r.name, c.Timers)
		}
		if outcomes := c.UpsertsBySearchAttribute[contract.WalReclaimedName]; outcomes != 1 {
			t.Errorf("%s: %d outcome upserts, want one at the end", r.name, outcomes)
		}
		if c.Upserts > maxUpsertsPerRun {
			t.Errorf("%s: %d search attribute upserts, budget %d per run", r.name, c.Upserts, maxUpsertsPerRun)
		}
		if res.Actions != c.Actions {
			t.Errorf("%s: the run counted %d actions, its history %d", r.name, res.Actions, c.Actions)
		}
		if r.shards == 1 && r.gens == 1 && c.Actions > maxOneShardRun {
			t.Errorf("%s: a one-shard, one-pass merge cost %d actions, budget %d", r.name, c.Actions, maxOneShardRun)
		}
		return c, res.Passes, false
	}
	measure := func(r run) (actioncount.Cost, int) {
		t.Helper()
		const tries = 3
		for i := 1; ; i++ {
			c, passes, disturbed := measureOnce(r)
			if !disturbed {
				return c, passes
			}
			if i == tries {
				t.Fatalf("%s: Temporal ran a task again in each of %d runs; no happy path to measure", r.name, tries)
			}
			t.Logf("%s: Temporal ran a task again; measuring again on a new store", r.name)
			r.name, r.target = fmt.Sprintf("%s-%d", r.name, i), fmt.Sprintf("%s-%d", r.target, i)
		}
	}
	for _, pair := range [][2]run{
		{{"s1p1", "generic:act1a", 1, 1}, {"s1p4", "generic:act1b", 1, 4}},
		{{"s2p2", "generic:act2a", 2, 1}, {"s2p6", "generic:act2b", 2, 3}},
	} {
		small, smallPasses := measure(pair[0])
		big, bigPasses := measure(pair[1])
		n := float64(bigPasses - smallPasses)
		actions := float64(big.Actions-small.Actions) / n
		events := float64(big.Events-small.Events) / n
		overhead := small.Actions - int(float64(smallPasses)*actions+0.5)
		t.Logf("%d shard(s): %.2f actions and %.2f events per shard pass; %d actions of run overhead",
			pair[0].shards, actions, events, overhead)
		if actions > maxActionsPerPass {
			t.Errorf("%d shard(s): %.2f actions per shard pass, budget %d", pair[0].shards, actions, maxActionsPerPass)
		}
		if events > maxEventsPerPass {
			t.Errorf("%d shard(s): %.2f events per shard pass, budget %d", pair[0].shards, events, maxEventsPerPass)
		}
		if overhead > maxRunOverhead {
			t.Errorf("%d shard(s): %d actions of run overhead, budget %d", pair[0].shards, overhead, maxRunOverhead)
		}
	}
}
