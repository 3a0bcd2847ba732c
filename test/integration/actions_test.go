package integration

import (
	"encoding/json"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/walkeeper/walkeeper/contract"
)

// historyCost is what one workflow run cost Temporal, counted from its real history.
type historyCost struct {
	Events int
	// Actions counts the billable actions visible in history (Temporal Cloud's definition):
	// the start, each activity attempt, each timer, each search attribute upsert, each
	// signal, each child start or external signal, each side-effect or local-activity
	// marker, continue-as-new. Activity heartbeats are billed but not in history (short passes send none, see
	// activities.reporter).
	Actions int
	Timers  int
	// Activities counts activity attempts; Upserts search attribute upserts.
	Activities int
	Upserts    int
	// Outcomes counts the upserts that record a finished merge (WalReclaimed).
	Outcomes int
	// Listings counts ListPendingShards activity tasks; LocalActivities local-activity
	// markers (MergeWal's listings), LocalAttempts the attempts
	// those markers record (a local activity retries inside the worker, one marker in all).
	Listings, LocalActivities, LocalAttempts int
}

// localActivityAttempts reads the attempt count a LocalActivity marker records (the SDK's
// marker data: {"ActivityType":...,"Attempt":n,...}); 1 if it cannot be read.
func localActivityAttempts(ev *historypb.HistoryEvent) int {
	for _, p := range ev.GetMarkerRecordedEventAttributes().GetDetails()["data"].GetPayloads() {
		var d struct{ Attempt int }
		if json.Unmarshal(p.GetData(), &d) == nil && d.Attempt > 0 {
			return d.Attempt
		}
	}
	return 1
}

func costOf(events []*historypb.HistoryEvent) historyCost {
	var c historyCost
	c.Events = len(events)
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			c.Actions++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.Actions++
			c.Activities++
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.ListPendingShardsActivity {
				c.Listings++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// Only the last attempt is recorded; the ones before it were billed too.
			if extra := int(ev.GetActivityTaskStartedEventAttributes().GetAttempt()) - 1; extra > 0 {
				c.Actions += extra
				c.Activities += extra
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Actions++
			c.Timers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.Actions++
			c.Upserts++
			if _, ok := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()[contract.WalReclaimedName]; ok {
				c.Outcomes++
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			switch ev.GetMarkerRecordedEventAttributes().GetMarkerName() {
			case "Version":
			case "LocalActivity":
				c.Actions++
				c.LocalActivities++
				c.LocalAttempts += localActivityAttempts(ev)
			default:
				c.Actions++
			}
		}
	}
	return c
}

func (e *env) historyCost(id, runID string) historyCost {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(e.ctx(waitShort), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		events = append(events, ev)
	}
	return costOf(events)
}

// Budgets of a happy-path MergeWal, from real histories on the dev server. A pass is its
// Prepare and its CommitRound (issue target: at most 3 actions per shard pass, no timers); a
// run adds a fixed overhead: the start, the first and the confirming listing (each a
// LocalActivity marker: one action), the WalPending upsert after the first listing and the
// outcome: 5, one more for a relisting by time on a loaded machine.
const (
	maxActionsPerPass = 3
	maxEventsPerPass  = 13
	maxRunOverhead    = 6
	// maxUpsertsPerRun: WalPending with WalPendingAtStart after the first listing, at most
	// two relistings by time on a loaded machine, and the outcome (WalReclaimed,
	// WalBytesMerged, WalPending) at the end. A drained relisting leaves WalPending to the
	// outcome.
	maxUpsertsPerRun = 4
)

// TestMergeWalActionsPerPass runs happy-path merges of one and two shards against the real
// server, one generation per pass, counts each history's actions and events, and derives
// the cost of one more pass from runs with more passes: it fails if a pass grows beyond its
// Prepare and CommitRound (plus a listing when a run outlives relistInterval on a loaded
// machine), or if any timer shows up.
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
	measure := func(r run) (historyCost, int) {
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
		c := e.historyCost(wr.GetID(), wr.GetRunID())
		t.Logf("%s: %d shard(s) × %d generation(s): %d passes, %d events, %d actions (%d activities, %d local-activity markers, %d upserts, %d timers)",
			r.name, r.shards, r.gens, res.Passes, c.Events, c.Actions, c.Activities, c.LocalActivities, c.Upserts, c.Timers)
		if c.Listings != 0 || c.LocalActivities < 2 {
			t.Errorf("%s: %d ListPendingShards activities and %d local-activity markers, want none and the first and confirming listing", r.name, c.Listings, c.LocalActivities)
		}
		if c.Timers != 0 {
			t.Errorf("%s: %d timers in a happy-path merge, want none", r.name, c.Timers)
		}
		if c.Outcomes != 1 {
			t.Errorf("%s: %d outcome upserts, want one at the end", r.name, c.Outcomes)
		}
		if c.Upserts > maxUpsertsPerRun {
			t.Errorf("%s: %d search attribute upserts, budget %d per run", r.name, c.Upserts, maxUpsertsPerRun)
		}
		return c, res.Passes
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
