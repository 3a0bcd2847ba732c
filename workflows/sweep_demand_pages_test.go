package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// pagedIndex is a demand index for the paged sweep: per kind its qualified stores (most
// indebted first) and its stores below every threshold. ScanDemand answers as the activity
// does: the MaxCandidates most indebted after p.After, Qualified counted from the cursor.
type pagedIndex struct {
	mu     sync.Mutex
	kinds  map[string][]contract.DemandTarget
	below  map[string]int
	failAt map[string]int // kind -> the page (1-based) whose every attempt fails
	params map[string][]contract.ScanDemandParams
}

func newPagedIndex() *pagedIndex {
	return &pagedIndex{kinds: map[string][]contract.DemandTarget{}, below: map[string]int{}, failAt: map[string]int{},
		params: map[string][]contract.ScanDemandParams{}}
}

// fill gives kind n qualified stores, each more indebted than the next.
func (x *pagedIndex) fill(kind string, n int) []contract.DemandTarget {
	ts := make([]contract.DemandTarget, n)
	for i := range ts {
		p := 8 + n - i
		ts[i] = contract.DemandTarget{Target: fmt.Sprintf("%s:s%06d", kind, i), Pending: p, MaxShardPending: p, PendingShards: 1}
	}
	x.kinds[kind] = ts
	return ts
}

func (x *pagedIndex) scan(_ context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.params[p.Kind] = append(x.params[p.Kind], p)
	page := 1 // attempts of one page share its cursor: pages are told apart by cursor
	if p.After != nil {
		page = 1 + distinctCursors(x.params[p.Kind])
	}
	if f := x.failAt[p.Kind]; f > 0 && page == f {
		return contract.ScanDemandResult{}, errors.New("list _demand/" + p.Kind + "/: connection reset")
	}
	all := x.kinds[p.Kind]
	res := contract.ScanDemandResult{Kind: p.Kind, StoresWithDebt: len(all) + x.below[p.Kind], Records: 3 * (len(all) + x.below[p.Kind])}
	for _, t := range all {
		if p.After != nil && !contract.DemandBefore(*p.After, t) {
			continue
		}
		res.Qualified++
		if len(res.Targets) < p.MaxCandidates {
			res.Targets = append(res.Targets, t)
		}
	}
	return res, nil
}

func distinctCursors(ps []contract.ScanDemandParams) int {
	seen := map[string]bool{}
	for _, p := range ps {
		if p.After != nil {
			seen[p.After.Target] = true
		}
	}
	return len(seen)
}

func (x *pagedIndex) paramsOf(kind string) []contract.ScanDemandParams {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]contract.ScanDemandParams(nil), x.params[kind]...)
}

// sweepCounts counts what a sweep scheduled, for its history bound.
type sweepCounts struct {
	mu         sync.Mutex
	activities map[string]int
	timers     int
}

func countSweep(env *testsuite.TestWorkflowEnvironment) *sweepCounts {
	c := &sweepCounts{activities: map[string]int{}}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		c.mu.Lock()
		c.activities[info.ActivityType.Name]++
		c.mu.Unlock()
	})
	env.SetOnTimerScheduledListener(func(string, time.Duration) {
		c.mu.Lock()
		c.timers++
		c.mu.Unlock()
	})
	return c
}

// events is an upper bound of the history the counted sweep wrote: every activity 3 events
// and the workflow task it wakes 3, every timer 2 and its workflow task 3, plus the start,
// the first and last workflow tasks and the markers.
func (c *sweepCounts) events() int {
	n := 24
	for _, a := range c.activities {
		n += 6 * a
	}
	return n + 5*c.timers
}

func runPaged(t *testing.T, x *pagedIndex, in contract.MaintenanceSweepInput) (*testsuite.TestWorkflowEnvironment, *fakeStarter, *sweepCounts) {
	t.Helper()
	env := newEnv(t)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(x.scan)
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil).Maybe()
	counts := countSweep(env)
	env.ExecuteWorkflow(MaintenanceSweep, in)
	require.True(t, env.IsWorkflowCompleted())
	return env, starter, counts
}

func targetsOf(reqs []contract.StartRequest, kind string) []string {
	var out []string
	for _, r := range reqs {
		if strings.HasPrefix(r.Target, kind+":") {
			out = append(out, r.Target)
		}
	}
	return out
}

func namesOf(ts []contract.DemandTarget) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Target
	}
	return out
}

// One kind with 2,500 stores over threshold and MaxStarts 2,200: three pages (1,000, 1,000,
// 200), each after the previous page's last candidate and with the sweep's one AsOf, the
// 2,200 most indebted started in debt order, the other 300 counted for the next sweep; the
// result lists 500 starts and counts the rest.
func TestPagedSweepFollowsDebtOrderAcrossPages(t *testing.T) {
	x := newPagedIndex()
	all := x.fill("generic", 2500)
	x.below["generic"] = 7
	env, starter, _ := runPaged(t, x, contract.MaintenanceSweepInput{MaxStarts: 2200})
	res := resultOf[contract.MaintenanceSweepResult](t, env)

	ps := x.paramsOf("generic")
	require.Len(t, ps, 3)
	require.Nil(t, ps[0].After)
	require.Equal(t, []int{1000, 1000, 200}, []int{ps[0].MaxCandidates, ps[1].MaxCandidates, ps[2].MaxCandidates})
	require.Equal(t, all[999], *ps[1].After)
	require.Equal(t, all[1999], *ps[2].After)
	require.False(t, ps[0].AsOf.IsZero())
	require.Equal(t, ps[0].AsOf, ps[1].AsOf)
	require.Equal(t, ps[0].AsOf, ps[2].AsOf)

	require.Equal(t, namesOf(all[:2200]), targetsOf(starter.requests, "generic"), "in debt order across pages")
	require.Equal(t, 2200, res.StartedCount())
	require.Len(t, res.Started, contract.MaxSweepListed)
	require.Equal(t, 2200-contract.MaxSweepListed, res.StartedOmitted)
	for i, s := range res.Started {
		require.Equal(t, all[i].Target, s.Target, "the listed starts are the most indebted")
	}
	require.Equal(t, 300, res.SkippedOmitted, "qualified stores past the last page wait for the next sweep")
	require.Equal(t, 2507, res.StoresWithDebt, "counted once, not per page")
	require.Equal(t, 2500, res.Qualified)
	require.Equal(t, 2200, res.Scanned)
	require.LessOrEqual(t, starter.batches, (2200+contract.DefaultSweepStartBatch-1)/contract.DefaultSweepStartBatch+3)
}

// MaxStarts is shared by the kinds as their pages return: generic's 1,500 and rollout's 800
// under MaxStarts 2,000 start 2,000 in all, each kind a prefix of its debt order, none twice;
// rollout's short first page ends its listing.
func TestPagedSweepMaxStartsAcrossPagesAndKinds(t *testing.T) {
	x := newPagedIndex()
	gen := x.fill("generic", 1500)
	roll := x.fill("rollout", 800)
	env, starter, _ := runPaged(t, x, contract.MaintenanceSweepInput{MaxStarts: 2000})
	res := resultOf[contract.MaintenanceSweepResult](t, env)

	// Each kind's starts are a prefix of its distinct stores and they are all the starts, so
	// none started twice.
	g, r := targetsOf(starter.requests, "generic"), targetsOf(starter.requests, "rollout")
	require.Equal(t, namesOf(gen[:len(g)]), g, "generic in debt order")
	require.Equal(t, namesOf(roll[:len(r)]), r, "rollout in debt order")
	require.Len(t, starter.requests, len(g)+len(r))
	require.Len(t, starter.requests, 2000)
	require.Len(t, x.paramsOf("rollout"), 1, "a short page ends the kind's listing")
	require.Len(t, x.paramsOf("datagen"), 1)
	asked := 0
	for _, p := range x.paramsOf("generic")[1:] {
		asked += p.MaxCandidates
	}
	require.LessOrEqual(t, asked, 2000-1000, "later pages ask only for what is left")
	require.Equal(t, 2000, res.StartedCount())
	require.Equal(t, 300, res.SkippedOmitted+countReason(res.Skipped, "max starts"))
}

func countReason(skips []contract.SweepSkip, sub string) int {
	n := 0
	for _, s := range skips {
		if strings.Contains(s.Reason, sub) {
			n++
		}
	}
	return n
}

// A page shorter than asked for ends the kind's listing: 999 stores are one page, 1,000 two
// (the second empty), and nothing is omitted.
func TestPagedSweepShortPageStops(t *testing.T) {
	for n, pages := range map[int]int{999: 1, 1000: 2} {
		x := newPagedIndex()
		x.fill("generic", n)
		env, starter, _ := runPaged(t, x, contract.MaintenanceSweepInput{})
		res := resultOf[contract.MaintenanceSweepResult](t, env)
		require.Len(t, x.paramsOf("generic"), pages, "%d stores", n)
		require.Len(t, starter.requests, n)
		require.Zero(t, res.SkippedOmitted)
	}
}

// A page that starts nothing ends the listing too (its candidates are compaction markers
// and compaction is off): the listing is bounded by progress, not by the index.
func TestPagedSweepStopsWithoutProgress(t *testing.T) {
	x := newPagedIndex()
	ts := make([]contract.DemandTarget, 3000)
	for i := range ts {
		ts[i] = contract.DemandTarget{Target: fmt.Sprintf("generic:c%06d", i), Compact: true}
	}
	x.kinds["generic"] = ts
	env, starter, _ := runPaged(t, x, contract.MaintenanceSweepInput{CompactMinRuns: -1})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, x.paramsOf("generic"), 1)
	require.Empty(t, starter.requests)
}

// A kind whose second page keeps failing fails the sweep with a non-retryable
// SweepListFailed naming it, after its first page's starts and the other kinds' went out.
func TestPagedSweepFailingPageFailsLoudly(t *testing.T) {
	x := newPagedIndex()
	gen := x.fill("generic", 1500)
	roll := x.fill("rollout", 20)
	x.failAt["generic"] = 2
	env, starter, _ := runPaged(t, x, contract.MaintenanceSweepInput{})
	appErr := requireNonRetryable(t, env, contract.ErrTypeSweepListFailed)
	require.Contains(t, appErr.Error(), "generic")
	require.Len(t, x.paramsOf("generic"), 1+5, "the first page, then the second page's 5 attempts")
	require.Equal(t, namesOf(gen[:1000]), targetsOf(starter.requests, "generic"), "the first page's starts went out")
	require.Equal(t, namesOf(roll), targetsOf(starter.requests, "rollout"), "the other kinds were served")
	var res contract.MaintenanceSweepResult
	require.NoError(t, appErr.Details(&res))
	require.Equal(t, 1020, res.StartedCount())
	require.Len(t, res.ScanErrors, 1)
}

// The history a sweep adds is bounded by contract.SweepHistoryBound: 10,000 starts of the
// default knobs over three kinds (10 pages, 40 batches) stay far under it, and the bound
// itself is at most MaxSweepEvents (an input whose bound would pass it is refused:
// TestMaintenanceSweepRefusesEachFieldOutOfBounds).
func TestPagedSweepHistoryBounded(t *testing.T) {
	x := newPagedIndex()
	x.fill("generic", 9000)
	x.fill("rollout", 1500)
	x.fill("datagen", 300)
	env, starter, counts := runPaged(t, x, contract.MaintenanceSweepInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, starter.requests, contract.DefaultSweepMaxStarts)

	bound := contract.SweepHistoryBound(len(target.Kinds), contract.DefaultSweepMaxStarts, contract.DefaultSweepStartBatch)
	require.LessOrEqual(t, bound, contract.MaxSweepEvents)
	pages := counts.activities[contract.ScanDemandActivity]
	require.LessOrEqual(t, pages, 10+len(target.Kinds), "pages: what MaxStarts needs plus one short page per kind")
	require.LessOrEqual(t, counts.activities[contract.StartWorkflowsActivity], contract.DefaultSweepMaxStarts/contract.DefaultSweepStartBatch+pages)
	t.Logf("10,000 starts: %d pages, %d batches, %d timers: at most %d events (bound %d)",
		pages, counts.activities[contract.StartWorkflowsActivity], counts.timers, counts.events(), bound)
	require.LessOrEqual(t, counts.events(), bound)
}

// The result stays under the payload limit at the most one sweep may start, with the
// longest store names: 256 starts and 256 skips listed, the rest counted.
func TestSweepResultPayloadBounded(t *testing.T) {
	long := strings.Repeat("n", 120)
	x := newPagedIndex()
	ts := make([]contract.DemandTarget, 12_000)
	for i := range ts {
		p := 8 + len(ts) - i
		ts[i] = contract.DemandTarget{Target: fmt.Sprintf("generic:%s%07d", long, i), Pending: p, MaxShardPending: p, PendingShards: 2,
			OldestPendingAge: 90 * time.Minute}
	}
	x.kinds["generic"] = ts
	marked := make([]contract.DemandTarget, 600) // compaction markers, compaction off: listed as skips
	for i := range marked {
		marked[i] = contract.DemandTarget{Target: fmt.Sprintf("datagen:%s%07d", long, i), Compact: true}
	}
	x.kinds["datagen"] = marked
	env, _, _ := runPaged(t, x, contract.MaintenanceSweepInput{MaxStarts: 10_500, StartBatch: 512, CompactMinRuns: -1})
	res := resultOf[contract.MaintenanceSweepResult](t, env)
	require.Equal(t, 10_500, res.StartedCount())
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("result of 10,500 starts with 128-byte names: %d bytes (%d listed, %d skips listed)", len(raw), len(res.Started), len(res.Skipped))
	require.Len(t, res.Skipped, contract.MaxSweepListed)
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
}

// One StartWorkflows batch stays under the payload limit both ways at MaxStartBatch with
// the longest store names, and the default batch of 256 well under it.
func TestStartBatchPayloadBounded(t *testing.T) {
	long := strings.Repeat("n", 127)
	for _, n := range []int{contract.DefaultSweepStartBatch, contract.MaxStartBatch} {
		var in contract.StartWorkflowsParams
		var out, failed contract.StartWorkflowsResult
		for i := range n {
			tgt := fmt.Sprintf("generic:%s", long[:127-7]) + fmt.Sprintf("%07d", i)
			in.Starts = append(in.Starts, roundLabel{window: "sweep-window-2026-12-01T16:00:00Z", round: 60}.request(contract.StartRequest{
				Workflow: contract.MergeWalWorkflow, Target: tgt, Trigger: contract.TriggerSweepCount, ParallelPrepare: true, Urgent: true,
				Reason: "10000 pending >= 8, oldest pending 1h30m0s"}))
			out.Outcomes = append(out.Outcomes, contract.StartOutcome{Workflow: contract.MergeWalWorkflow, Target: tgt,
				WorkflowID: "merge-wal/generic/" + tgt[len("generic:"):], RunID: "0195e5d2-7b1c-7e3a-9f00-3c5d2a1b4e6f"})
			failed.Outcomes = append(failed.Outcomes, contract.StartOutcome{Workflow: contract.MergeWalWorkflow, Target: tgt,
				WorkflowID: "merge-wal/generic/" + tgt[len("generic:"):], Error: contract.StartErrorText(strings.Repeat("<\"", contract.MaxPayloadBytes))})
		}
		// The worst result: every start but one failed, each error as long as an outcome
		// keeps, and every byte of it escaped in JSON.
		failed.Outcomes[0] = out.Outcomes[0]
		rawFailed, err := json.Marshal(failed)
		require.NoError(t, err)
		t.Logf("%d starts, all but one failed: %d bytes out", n, len(rawFailed))
		require.LessOrEqual(t, len(rawFailed), contract.MaxPayloadBytes)
		rawIn, err := json.Marshal(in)
		require.NoError(t, err)
		rawOut, err := json.Marshal(out)
		require.NoError(t, err)
		t.Logf("%d starts with 128-byte names: %d bytes in, %d bytes out", n, len(rawIn), len(rawOut))
		require.LessOrEqual(t, len(rawIn), contract.MaxPayloadBytes)
		require.LessOrEqual(t, len(rawOut), contract.MaxPayloadBytes)
	}
}

// The fake index's order is DemandBefore's, as the activity's.
func TestPagedIndexOrder(t *testing.T) {
	x := newPagedIndex()
	ts := x.fill("generic", 50)
	require.True(t, sort.SliceIsSorted(ts, func(i, j int) bool { return contract.DemandBefore(ts[i], ts[j]) }))
}

// A window round that pages counts every start, listed or not: the round's Started, the
// window's totals and the round's words. (A sweep input past the bounds fails the window at
// once instead of failing every round for an hour: TestSweepWindowRefusesEachFieldOutOfBounds.)
func TestSweepWindowRoundCountsOmittedStarts(t *testing.T) {
	x := newPagedIndex()
	x.fill("generic", 1500)
	env := newEnv(t)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(x.scan)
	starter := &fakeStarter{}
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(starter.start)
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil).Maybe()
	res := runWindow(t, env, contract.SweepWindowInput{Interval: time.Minute, Window: 30 * time.Second})
	require.Len(t, starter.requests, 1500)
	require.Equal(t, 1500, res.Totals.Started)
	require.Len(t, res.Recent, 1)
	require.Equal(t, 1500, res.Recent[0].Started)
	require.Len(t, res.Recent[0].Starts, contract.MaxSweepRoundStarts)
	require.Equal(t, fmt.Sprintf("round 1: started 1500 (first %d: %d sweep-count; %d more)", contract.MaxSweepListed, contract.MaxSweepListed, 1500-contract.MaxSweepListed),
		res.Recent[0].Summary)
	require.Len(t, x.paramsOf("generic"), 2)
}

// TestFindingSweepOfEscapedStartFailuresFitsItsPayload: a sweep whose every StartWorkflows
// batch fails as a whole, and one kind's listing, with long errors of characters JSON escapes
// (an XML error body's '<', '>', '&', control bytes) reports a result under MaxPayloadBytes,
// where each of its 256 listed skips repeated the batch's whole error.
func TestFindingSweepOfEscapedStartFailuresFitsItsPayload(t *testing.T) {
	long := strings.Repeat("n", 120)
	escaped := strings.Repeat("<&>\x01", 2<<10)
	x := newPagedIndex()
	ts := make([]contract.DemandTarget, 600)
	for i := range ts {
		p := 8 + len(ts) - i
		ts[i] = contract.DemandTarget{Target: fmt.Sprintf("generic:%s%07d", long, i), Pending: p, MaxShardPending: p, PendingShards: 2}
	}
	x.kinds["generic"] = ts
	env := newEnv(t)
	env.OnActivity(contract.ScanDemandActivity, anyCtx, anyArg).Return(func(ctx context.Context, p contract.ScanDemandParams) (contract.ScanDemandResult, error) {
		if p.Kind == "rollout" {
			return contract.ScanDemandResult{}, temporal.NewNonRetryableApplicationError(escaped, "Listing", nil)
		}
		return x.scan(ctx, p)
	})
	env.OnActivity(contract.StartWorkflowsActivity, anyCtx, anyArg).Return(func(context.Context, contract.StartWorkflowsParams) (contract.StartWorkflowsResult, error) {
		return contract.StartWorkflowsResult{}, temporal.NewNonRetryableApplicationError("all 512 starts failed, last: "+escaped, "Starting", nil)
	})
	env.OnActivity(contract.RecordMaintenanceActivity, anyCtx, anyArg).Return(nil).Maybe()
	env.ExecuteWorkflow(MaintenanceSweep, contract.MaintenanceSweepInput{MaxStarts: 600, StartBatch: 512})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr), "got %v", env.GetWorkflowError())
	var res contract.MaintenanceSweepResult
	require.NoError(t, appErr.Details(&res))
	require.Len(t, res.Skipped, contract.MaxSweepListed)
	require.Len(t, res.ScanErrors, 1)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	t.Logf("result of %d failed starts and a failed listing with escaped errors: %d bytes", len(ts), len(raw))
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
}
