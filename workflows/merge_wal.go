package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// maxStaleRestarts bounds consecutive abort-and-prepare-again cycles of one shard: a
// preparation keeps going stale only if someone else keeps merging the same shard.
const maxStaleRestarts = 3

// MergeWal folds every shard's pending generations of one target into its base table
// (docs/DESIGN.md §3, §4): a pass is a Prepare on the owner's queue, then its shard's part of
// a round commit through the one commit loop (roundCommitLoop). A failing shard records its
// error and the others go on; the workflow fails only when every shard failed for good.
func MergeWal(ctx workflow.Context, in contract.MergeWalInput) (contract.MergeWalResult, error) {
	carried := ""
	if in.Carry != nil {
		carried = "carry"
	}
	tgt, err := checkTargetInput(ctx, in, carried, in.Target, contract.MergeWalID)
	if err != nil {
		return contract.MergeWalResult{}, err
	}
	in = in.WithDefaults()
	r := newMergeRun(ctx, in, tgt)
	if err := workflow.SetQueryHandler(ctx, contract.StatusQuery, func() (contract.MergeWalStatus, error) {
		return r.status(), nil
	}); err != nil {
		return r.result(), err
	}
	if ensureTargetAttributes(ctx, tgt, in.Trigger) {
		r.upserts++
	}
	r.log.Info("Merge started.", "workflow_run", r.workflowRun, "parallel_prepare", in.ParallelPrepare,
		"trigger", contract.TriggerWords(in.Trigger, in.TriggerReason))

	// Step 1. List the shards with pending generations (any worker can read the manifests).
	r.setPhase(contract.PhaseListing)
	listed, err := r.list(ctx)
	if err != nil {
		r.setPhase(contract.PhaseDone)
		return r.result(), r.listFailure(err)
	}
	r.listedAt = workflow.Now(ctx)
	r.plan(listed.Shards)
	if r.pendingAtStart < 0 { // the chain's first listing
		r.pendingAtStart = r.totalPending()
	}

	// Step 2. Merge the shards, one commit at a time.
	r.setPhase(contract.PhaseMerging)
	r.mergeShards(ctx)
	if ctx.Err() != nil {
		return r.result(), ctx.Err()
	}

	// Step 3. Hand over to a fresh run when one is due (passes per run, Temporal's suggestion
	// or the run's age), else report.
	if r.stopping && len(r.todo()) > 0 {
		r.setPhase(contract.PhaseContinuing)
		next := r.in
		next.Carry = r.carry(carryCutOf(ctx))
		r.log.Info("Merge continues as new.", "passes", r.passes)
		return r.result(), workflow.NewContinueAsNewError(ctx, contract.MergeWalWorkflow, next)
	}
	res := r.finish()
	r.log.Info("Merge finished.", "reclaimed", res.Reclaimed, "passes", res.Passes, "bytes", res.BytesMerged)
	if r.allFailedPermanently() {
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("every shard of %s failed: %s", tgt, res.Shards[0].Error),
			contract.ErrTypeAllShardsFailed, nil, res)
	}
	return res, nil
}

// mergeRun is one run's state, shared by coroutines that never run in parallel (no locks).
type mergeRun struct {
	ctx    workflow.Context
	in     contract.MergeWalInput
	target target.Target
	log    log.Logger
	tr     *tracker
	// workflowRun is this run's number in the continue-as-new chain, from 1.
	workflowRun int
	phase       string
	shards      []*shardRun
	current     *shardRun
	passes      int // committed passes in this run
	stopping    bool
	// upserts and timers count this run's search attribute upserts and timers (one billable
	// action each).
	upserts, timers int
	// hot: a confirming listing found generations sealed while this run merged.
	hot bool
	// The GetVersion changes the run started on, each named after its change (newMergeRun).
	hotRoundsCommitOnce bool
	abortsSurviveCancel bool
	resultCapped        bool
	resultErrorsCut     bool
	shardsBounded       bool
	abortCountsOwnPass  bool
	// retriesPassing: the run's first plan merges again a carried shard whose failure could
	// pass (retriedFailuresChange; read only by a run that carries one).
	retriesPassing bool
	// preparing counts the passes of the current round that may still ask for a commit;
	// asking counts the commit requests sent and not yet taken by the commit loop.
	preparing, asking int
	// listedAt is the workflow time of the last listing (rounds relist by time).
	listedAt time.Time
	// pendingAtStart is the total pending of the chain's first listing (-1: not listed yet).
	pendingAtStart int
}

// relistInterval bounds how stale a run's shard estimates may get while it merges: a
// shard that starts sealing mid-merge, or seals again after it was drained, joins the
// rounds at the next listing, at most this long after the previous one (or when every
// other shard is drained). The status query shows the listings' estimate.
const relistInterval = 10 * time.Second

type shardRun struct {
	res         contract.ShardMergeResult
	phase       string
	queue       string
	staleInARow int
}

func newMergeRun(ctx workflow.Context, in contract.MergeWalInput, tgt target.Target) *mergeRun {
	r := &mergeRun{
		ctx:            ctx,
		in:             in,
		target:         tgt,
		log:            log.With(workflow.GetLogger(ctx), "target", tgt.String()),
		workflowRun:    1,
		phase:          contract.PhaseStarting,
		pendingAtStart: -1,
	}
	if in.Carry != nil {
		r.workflowRun = in.Carry.WorkflowRuns + 1
		r.pendingAtStart = in.Carry.PendingAtStart
	}
	r.tr = newTracker(ctx, max(in.SlotWaitThreshold, 0), r.changed)
	r.hotRoundsCommitOnce = gated(ctx, hotRoundCommitsChange)
	r.abortsSurviveCancel = gated(ctx, abortSurvivesCancelChange)
	r.resultCapped = gated(ctx, resultCappedChange)
	r.shardsBounded = gated(ctx, shardsBoundedChange)
	r.abortCountsOwnPass = gated(ctx, abortCountsOwnPassChange)
	r.resultErrorsCut = gated(ctx, resultErrorsCutChange)
	if in.Carry != nil && slices.ContainsFunc(in.Carry.Shards, failureMayPass) {
		r.retriesPassing = gated(ctx, retriedFailuresChange)
	}
	return r
}

// retriedFailuresChange is the GetVersion change ID of a continued run that merges again a
// carried shard whose failure could pass (a storage outage, a worker gone mid-prepare): a
// failed verdict kept for the whole chain left that shard unmerged while the store's other
// shards kept the chain running, hours in a hot store, with every trigger attached to it.
const retriedFailuresChange = "merge-retries-passing-failures"

// failureMayPass reports whether a shard's result is a failure that retrying could cure: not
// permanent (a damaged object, bad input) and not at max_passes. Pure.
func failureMayPass(sh contract.ShardMergeResult) bool {
	return sh.Finished && sh.Error != "" && !sh.Permanent && !sh.MaxPassesReached
}

// plan merges a listing into the shards known so far (the carried results on a run's first
// call), in shard order: a finished shard stays finished, one with nothing pending is done,
// and a drained shard that sealed again is merged again. A bounded run (shardsBounded) takes
// no new shard past contract.MaxCarriedShards, so its carry always passes the next run.
func (r *mergeRun) plan(listed []contract.ShardPending) {
	all := r.shards
	carried := all == nil && r.in.Carry != nil // this run's first plan
	if carried {
		for _, c := range r.in.Carry.Shards {
			all = append(all, &shardRun{res: c})
		}
	}
	byShard := map[string]*shardRun{}
	for _, sh := range all {
		byShard[sh.res.Shard] = sh
	}
	seen := map[string]bool{}
	left := 0
	for _, sp := range listed {
		if sp.Pending <= 0 {
			continue
		}
		seen[sp.Shard] = true
		if sh, ok := byShard[sp.Shard]; ok {
			if sh.res.Finished && sh.res.Error == "" && !sh.res.MaxPassesReached {
				sh.res.Finished = false
			}
			if carried && r.retriesPassing && failureMayPass(sh.res) && sh.res.Passes < r.in.MaxPasses {
				// Once per run, so a failure that persists costs each run one prepare's retries.
				r.log.Info("Shard merged again after a failure that may have passed.", "shard", sh.res.Shard, "error", sh.res.Error)
				sh.res.Finished, sh.res.Error, sh.res.ErrorType = false, "", ""
			}
			if !sh.res.Finished {
				sh.res.Pending = sp.Pending
			}
			continue
		}
		if !roomForShard(r.shardsBounded, len(all)) {
			left++
			continue
		}
		sh := &shardRun{res: contract.ShardMergeResult{Shard: sp.Shard, Pending: sp.Pending}}
		byShard[sp.Shard] = sh
		all = append(all, sh)
	}
	for _, sh := range all {
		if !sh.res.Finished && !seen[sh.res.Shard] {
			sh.res.Finished, sh.res.Pending = true, 0
		}
		switch {
		case sh.res.Error != "":
			sh.phase = contract.ShardFailed
		case sh.res.Finished:
			sh.phase = contract.ShardDone
		default:
			sh.phase = contract.ShardQueued
		}
	}
	if left > 0 {
		r.log.Info("Shards left for the next merge: the run holds as many as it can carry.", "left", left, "shards", len(all))
	}
	slices.SortFunc(all, func(a, b *shardRun) int { return strings.Compare(a.res.Shard, b.res.Shard) })
	r.shards = all
	r.changed()
}

func (r *mergeRun) todo() []*shardRun {
	return slices.DeleteFunc(slices.Clone(r.shards), func(sh *shardRun) bool { return sh.res.Finished })
}

type commitRequest struct {
	sh    *shardRun
	p     *contract.PreparedMerge
	reply workflow.Channel
}

// commitOutcome is a pass's part of a round commit: its shard's result, or why it failed.
type commitOutcome struct {
	res contract.RoundShardResult
	err error
}

// mergeShards runs every unfinished shard: prepares in the shard coroutines, commits only in
// the single commit loop.
func (r *mergeRun) mergeShards(ctx workflow.Context) {
	if len(r.todo()) == 0 {
		return
	}
	commits := workflow.NewChannel(ctx)
	loopDone := workflow.NewWaitGroup(ctx)
	loopDone.Add(1)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer loopDone.Done()
		r.roundCommitLoop(ctx, commits)
	})
	r.mergeRounds(ctx, commits)
	commits.Close()
	loopDone.Wait(ctx)
}

// mergeRounds runs rounds of at most one pass per shard, most indebted first, each a coroutine
// behind the prepare semaphore, so a shard that seals as fast as it is merged cannot starve
// the others; a drained shard that sealed since is merged again here, since the next MergeWal
// would only attach to this one. A shard leaves the rounds when drained, failed or at
// MaxPasses; the rounds end when one commits nothing.
func (r *mergeRun) mergeRounds(ctx workflow.Context, commits workflow.Channel) {
	prepares := 1
	if r.in.ParallelPrepare {
		prepares = r.in.PrepareConcurrency
	}
	sem := workflow.NewSemaphore(ctx, int64(prepares))
	// Hot (r.hot): a confirming listing found generations sealed while this run merged. From
	// then on the run's writers seal as fast as it merges, and a listing at once would find a
	// round's worth of seals per shard: passes of a few generations at 2 actions each. A hot
	// run lists again only relistInterval after its last listing (one timer), so each pass
	// folds what the shard sealed in that time.
	for round := 1; ; round++ {
		// Listing each round would cost an action per pass on a one-shard table; the
		// estimates (listed pending minus what the passes folded) plan the rounds in
		// between, and a drained plan is confirmed by a fresh listing.
		relisted := round > 1 && workflow.Now(ctx).Sub(r.listedAt) >= relistInterval
		if relisted {
			r.relist(ctx)
		}
		order := roundOrder(r.todo())
		if len(order) == 0 && round > 1 && !relisted {
			if r.hot && !r.waitToRelist(ctx) {
				return
			}
			r.relist(ctx)
			order = roundOrder(r.todo())
			r.hot = r.hot || len(order) > 0
		}
		if len(order) == 0 {
			return
		}
		progress := false
		wg := workflow.NewWaitGroup(ctx)
		for _, sh := range order {
			wg.Add(1)
			pass := r.joinRound()
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				defer r.leaveRound(pass)
				if r.mergePass(ctx, sh, commits, sem, pass) {
					progress = true
					// Its turn is over; it waits for the next round.
					sh.phase = contract.ShardQueued
					r.changed()
				}
			})
		}
		wg.Wait(ctx)
		if !progress || r.stopping || ctx.Err() != nil {
			// Nothing moved (every shard drained, failed or at MaxPasses: a listing that
			// keeps claiming debt no prepare finds must not loop forever), or
			// continue-as-new is due.
			return
		}
	}
}

// waitToRelist waits until relistInterval after the last listing (a timer, when that is
// still ahead). It reports false when the run is cancelled meanwhile.
func (r *mergeRun) waitToRelist(ctx workflow.Context) bool {
	wait := r.listedAt.Add(relistInterval).Sub(workflow.Now(ctx))
	if wait <= 0 {
		return true
	}
	r.setPhase(contract.PhaseWaiting)
	defer r.setPhase(contract.PhaseMerging)
	timer := workflow.NewTimerWithOptions(ctx, wait, workflow.TimerOptions{Summary: "wait for more sealed generations"})
	r.timers++
	return timer.Get(ctx, nil) == nil
}

// roundOrder is one round's visiting order: the shards whose estimate says something is
// pending, most estimated pending generations first, then shard id. Pure.
func roundOrder(shards []*shardRun) []*shardRun {
	out := slices.DeleteFunc(slices.Clone(shards), func(sh *shardRun) bool { return sh.res.Pending <= 0 })
	slices.SortStableFunc(out, func(a, b *shardRun) int {
		return cmp.Or(cmp.Compare(b.res.Pending, a.res.Pending), strings.Compare(a.res.Shard, b.res.Shard))
	})
	return out
}

// relist refreshes every shard's pending count before a round. If the listing fails the
// round goes on with the estimates: a drained shard then finds out with an empty prepare.
func (r *mergeRun) relist(ctx workflow.Context) {
	r.setPhase(contract.PhaseListing)
	defer r.setPhase(contract.PhaseMerging)
	listed, err := r.list(ctx)
	if err != nil {
		r.log.Warn("Cannot list pending shards; the round goes on with estimates.", "error", err)
		return
	}
	r.listedAt = workflow.Now(ctx)
	r.plan(listed.Shards)
}

// mergePass prepares and commits one pass of sh and reports whether one was committed (or
// found committed by the abort); false when the shard is done or the run stops. A stale
// preparation is aborted and prepared again, at most maxStaleRestarts times in a row.
func (r *mergeRun) mergePass(ctx workflow.Context, sh *shardRun, commits workflow.Channel, sem workflow.Semaphore, pass *roundPass) bool {
	for ctx.Err() == nil {
		if sh.res.Passes >= r.in.MaxPasses {
			sh.res.Finished, sh.res.MaxPassesReached = true, true
			sh.phase = contract.ShardDone
			r.log.Info("Shard reached max passes.", "shard", sh.res.Shard, "pending", sh.res.Pending)
			r.changed()
			return false
		}
		p, ok, err := r.prepare(ctx, sh, sem)
		if !ok {
			sh.phase = contract.ShardQueued
			r.changed()
			return false
		}
		if err != nil {
			r.fail(sh, "prepare", err, nil)
			return false
		}
		if p == nil {
			sh.res.Finished, sh.res.Pending = true, 0
			sh.phase = contract.ShardDone
			r.changed()
			return false
		}

		sh.phase = contract.ShardWaitingCommit
		r.changed()
		reply := workflow.NewBufferedChannel(ctx, 1)
		r.leaveRound(pass)
		r.asking++
		commits.Send(ctx, &commitRequest{sh: sh, p: p, reply: reply})
		var out commitOutcome
		reply.Receive(ctx, &out)
		if out.err == nil {
			r.committed(sh, p, out.res)
			return true
		}

		// The commit failed. Abort proves it absent (and deletes the staged files) or finds
		// it present after all (a lost reply, or another attempt merged the same range).
		stale := errorType(out.err) == contract.ErrTypeStalePreparation
		ab, abErr := r.abort(ctx, sh, p)
		if abErr == nil && ab.CommitPresent {
			r.committed(sh, p, contract.RoundShardResult{Shard: sh.res.Shard, Reclaimed: r.abortReclaimed(p, ab)})
			return true
		}
		if stale && abErr == nil && sh.staleInARow < maxStaleRestarts {
			sh.staleInARow++
			sh.res.Restarts++
			r.log.Info("Stale preparation aborted; preparing again.", "shard", sh.res.Shard)
			r.rejoinRound(pass)
			continue
		}
		r.fail(sh, "commit", out.err, abErr)
		return false
	}
	return false
}

// prepare runs one Prepare. ok is false when the shard should stop without a result (a
// continue-as-new became due while it waited for a prepare slot).
func (r *mergeRun) prepare(ctx workflow.Context, sh *shardRun, sem workflow.Semaphore) (*contract.PreparedMerge, bool, error) {
	if r.stopping {
		return nil, false, nil
	}
	if err := sem.Acquire(ctx, 1); err != nil {
		return nil, false, nil
	}
	defer sem.Release(1)
	if r.stopping {
		return nil, false, nil
	}
	sh.phase = contract.ShardPreparing
	r.current = sh
	params := contract.PrepareParams{
		Target:         r.target.String(),
		Shard:          sh.res.Shard,
		MaxGenerations: r.in.MaxGenerations,
		MaxBytes:       r.in.MaxBytes,
		NotifyAfter:    r.tr.slotWait,
	}
	var res contract.PrepareResult
	if !sh.res.SharedQueue {
		sh.queue = contract.ShardQueue(sh.res.Shard)
		w := r.tr.newWatch(contract.PrepareActivity, sh.res.Shard, sh.queue)
		err := r.tr.exec(ctx, r.prioritized(prepareOptions(r.in.PrepareTimeout, r.in.ScheduleToStartTimeout, r.activitySummary("prepare", sh, false))), w, params, &res)
		if !isScheduleToStartTimeout(err) {
			return res.Prepared, true, err
		}
		r.fallBack(sh)
	}
	w := r.tr.newWatch(contract.PrepareActivity, sh.res.Shard, contract.TaskQueue)
	err := r.tr.exec(ctx, r.prioritized(prepareOptions(r.in.PrepareTimeout, 0, r.activitySummary("prepare", sh, true))), w, params, &res)
	return res.Prepared, true, err
}

// abort discards a prepared merge on the shared queue (clean-up needs no locality). It
// still runs when the workflow is being cancelled, so staged files do not leak: on a run
// that started before abortSurvivesCancelChange, only if the Cancel came before it.
func (r *mergeRun) abort(ctx workflow.Context, sh *shardRun, p *contract.PreparedMerge) (contract.AbortResult, error) {
	sh.phase = contract.ShardAborting
	if r.abortsSurviveCancel || ctx.Err() != nil {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	var res contract.AbortResult
	w := r.tr.newWatch(contract.AbortActivity, sh.res.Shard, contract.TaskQueue)
	err := r.tr.exec(ctx, r.prioritized(abortOptions(r.activitySummary("abort", sh, false))), w, contract.AbortParams{Prepared: *p}, &res)
	if err != nil {
		r.log.Warn("Abort failed; staged files may leak.", "shard", sh.res.Shard, "error", err)
	}
	return res, err
}

func (r *mergeRun) fallBack(sh *shardRun) {
	sh.res.SharedQueue = true
	sh.queue = contract.TaskQueue
	r.log.Warn("Shard queue has no worker in time; using the shared queue.",
		"shard", sh.res.Shard, "activity", contract.PrepareActivity, "timeout", r.in.ScheduleToStartTimeout)
	r.changed()
}

func (r *mergeRun) committed(sh *shardRun, p *contract.PreparedMerge, res contract.RoundShardResult) {
	sh.res.Passes++
	r.passes++
	sh.res.Reclaimed += res.Reclaimed
	sh.res.BaseVersion = max(sh.res.BaseVersion, res.BaseVersion)
	sh.res.BytesMerged += p.Bytes
	sh.res.Pending = max(0, sh.res.Pending-len(p.Generations))
	sh.staleInARow = 0
	sh.phase = contract.ShardPreparing
	r.log.Info("Merge pass committed.", "shard", sh.res.Shard, "generation", p.Through,
		"reclaimed", res.Reclaimed, "base_version", res.BaseVersion, "pending", sh.res.Pending)
	if r.passes >= r.in.PassesPerWorkflowRun || workflow.GetInfo(r.ctx).GetContinueAsNewSuggested() || runHandOverDue(r.ctx) {
		r.stopping = true
	}
	r.changed()
}

func (r *mergeRun) fail(sh *shardRun, step string, err, abortErr error) {
	sh.res.Finished = true
	text := step + ": " + errorText(err)
	if abortErr != nil {
		text += "; abort: " + errorText(abortErr)
	}
	sh.res.Error = contract.FailureText(text)
	sh.res.ErrorType = errorType(err)
	sh.res.Permanent = contract.PermanentError(err)
	sh.phase = contract.ShardFailed
	r.log.Warn("Shard merge failed.", "shard", sh.res.Shard, "step", step, "error", err,
		"permanent", sh.res.Permanent)
	r.changed()
}

func (r *mergeRun) allFailedPermanently() bool {
	return len(r.shards) > 0 && !slices.ContainsFunc(r.shards, func(sh *shardRun) bool { return sh.res.Error == "" || !sh.res.Permanent })
}

func (r *mergeRun) totalPending() int {
	n := 0
	for _, sh := range r.shards {
		n += sh.res.Pending
	}
	return n
}

func (r *mergeRun) setPhase(p string) {
	r.phase = p
	r.changed()
}

// changed refreshes the current details shown in Temporal Web.
func (r *mergeRun) changed() {
	setDetails(r.ctx, r.details())
}

func (r *mergeRun) result() contract.MergeWalResult {
	res := contract.MergeWalResult{Target: r.target.String(), WorkflowRuns: r.workflowRun, Shards: r.shardResults()}
	for _, sh := range res.Shards {
		res.Reclaimed += sh.Reclaimed
		res.Passes += sh.Passes
		res.BaseVersion = max(res.BaseVersion, sh.BaseVersion)
		res.BytesMerged += sh.BytesMerged
	}
	res.PendingAtStart = max(0, r.pendingAtStart)
	res.Actions = r.actions()
	if r.resultCapped {
		res = res.CapShards(contract.MaxResultShards)
	}
	if r.resultErrorsCut {
		res = res.CutErrors()
	}
	return res
}

// status answers the status query: the totals of every shard and at most
// contract.MaxStatusShards of them listed, so the answer fits a query.
func (r *mergeRun) status() contract.MergeWalStatus {
	return r.statusOfEveryShard().CapShards(contract.MaxStatusShards)
}

// statusOfEveryShard is the run's status with every shard listed: it grows with the shards.
func (r *mergeRun) statusOfEveryShard() contract.MergeWalStatus {
	st := contract.MergeWalStatus{
		Target:        r.target.String(),
		Phase:         r.phase,
		Pending:       r.totalPending(),
		WorkflowRun:   r.workflowRun,
		Shards:        []contract.ShardStatus{},
		IgnoredFields: ignoredFields(r.ctx),
	}
	for _, sh := range r.shards {
		ss := contract.ShardStatus{
			Shard:     sh.res.Shard,
			Phase:     sh.phase,
			Pending:   sh.res.Pending,
			Passes:    sh.res.Passes,
			Reclaimed: sh.res.Reclaimed,
			Queue:     sh.queue,
			Blocked:   r.tr.blocked(sh.res.Shard),
			Error:     sh.res.Error,
		}
		st.Shards = append(st.Shards, ss)
		st.Reclaimed += sh.res.Reclaimed
		if st.Blocked == "" && ss.Blocked != "" {
			st.Blocked = "shard " + contract.ShardLabel(sh.res.Shard) + ": " + ss.Blocked
		}
	}
	if st.Blocked == "" {
		st.Blocked = r.tr.blocked("")
	}
	st.InFlight, st.SlotWait, st.RefusedSignals = r.tr.inFlight(), r.tr.slotWait, r.tr.refused
	if sh := r.current; sh != nil {
		st.Shard = sh.res.Shard
		st.Pass = sh.res.Passes
		if !sh.res.Finished {
			st.Pass++
		}
	}
	return st
}

// details is the short markdown progress line Temporal Web shows for the run.
func (r *mergeRun) details() string {
	if r.phase == contract.PhaseDone {
		return r.outcomeDetails()
	}
	st := r.status()
	done := 0
	for _, sh := range r.shards {
		if sh.res.Finished {
			done++
		}
	}
	line := fmt.Sprintf("**%s** %s · shards %d/%d done · %d generations reclaimed · ~%d pending",
		st.Target, st.Phase, done, len(r.shards), st.Reclaimed, st.Pending)
	if st.Shard != "" && st.Phase == contract.PhaseMerging {
		line += fmt.Sprintf(" · shard `%s` pass %d", contract.ShardLabel(st.Shard), st.Pass)
	}
	if st.Blocked != "" {
		line += "\n\n**blocked:** " + st.Blocked
	}
	return line
}
