package activities

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// ListPendingShards lists the target's shards with pending generations, in shard order: at
// most contract.MaxListedShards, oldest pending first (pickListed), counting the rest.
func (a *Activities) ListPendingShards(ctx context.Context, p contract.ListPendingShardsParams) (res contract.ListPendingShardsResult, err error) {
	defer a.done(contract.ListPendingShardsActivity, kindOf(p.Target), time.Now(), "ok", &err)

	s, _, err := a.openDemanded(ctx, p.Target)
	if err != nil {
		return res, err
	}
	shards, err := s.PendingShards(ctx)
	if err != nil {
		return res, err
	}
	if len(shards) == 0 {
		// Nothing to prepare, so no Repair deletes what a merge's clean-up of the demand index
		// left: without this the sweep starts a merge for those records every round. Best
		// effort, as that clean-up is.
		cctx, cancel := context.WithTimeout(ctx, demandCleanTimeout)
		_, err := s.CleanIdleDemand(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			a.logger().Warn("demand clean-up of a store with nothing pending failed", zap.String("target", p.Target), zap.Error(err))
		}
	}
	all := make([]contract.ShardPending, 0, len(shards))
	for _, sh := range shards {
		all = append(all, contract.ShardPending{
			Shard:         sh.Shard,
			Pending:       sh.PendingGenerations,
			PendingBytes:  sh.PendingBytes,
			Watermark:     sh.Watermark,
			OldestPending: sh.OldestPending,
		})
	}
	res.Shards, res.Unlisted = pickListed(all, contract.MaxListedShards)
	return res, nil
}

// pickListed keeps at most limit of the pending shards, oldest pending generation first (zero:
// oldest), and returns them in shard order with the number left out. A shard left out keeps
// its oldest generation while the others' get younger, so it moves up until listed. Pure.
func pickListed(shards []contract.ShardPending, limit int) ([]contract.ShardPending, int) {
	out := append(make([]contract.ShardPending, 0, len(shards)), shards...)
	unlisted := 0
	if len(out) > limit {
		slices.SortStableFunc(out, func(a, b contract.ShardPending) int {
			return cmp.Or(a.OldestPending.Compare(b.OldestPending), cmp.Compare(b.Pending, a.Pending), strings.Compare(a.Shard, b.Shard))
		})
		unlisted = len(out) - limit
		out = out[:limit]
	}
	slices.SortFunc(out, func(a, b contract.ShardPending) int { return strings.Compare(a.Shard, b.Shard) })
	return out, unlisted
}

// budgetWaitHint: a Prepare that has read nothing this long while the budget has waiters is
// reported as waiting for it (a heuristic: a slow first read looks the same).
const budgetWaitHint = 2 * time.Second

// Prepare repairs what an interrupted merge of one shard left, then merges its oldest pending
// generations into staged files keyed by the attempt, so a retry overwrites its own (nil
// Prepared: nothing pending); progress and the budget wait are heartbeated.
func (a *Activities) Prepare(ctx context.Context, p contract.PrepareParams) (res contract.PrepareResult, err error) {
	outcome := "ok"
	ctx, call := a.beginStoreCall(ctx, contract.PrepareActivity, p.NotifyAfter, contract.PrepareProgress{State: contract.PrepareStateStarting})
	defer func() { err = call.end(kindOf(p.Target), outcome, err) }()

	s, t, err := a.open(ctx, p.Target)
	if err != nil {
		return res, err
	}
	log := a.logger().With(zap.String("target", t.String()), zap.String("shard", p.Shard),
		zap.String("workflow_id", activity.GetInfo(ctx).WorkflowExecution.ID))

	// Finish what an interrupted merge of the shard left before planning a new one; in this
	// activity rather than its own, since every activity costs a Temporal action.
	if _, err := s.Repair(ctx, store.RepairParams{Shard: p.Shard}); err != nil {
		log.Warn("repair failed", zap.Error(err))
		return res, err
	}

	// Watch for a budget wait until the first generation has been read (firstRead may be
	// called any number of times).
	read, firstRead := context.WithCancel(context.Background())
	var watch sync.WaitGroup
	watch.Go(func() { a.watchBudget(call.rep, read.Done()) })
	defer func() {
		firstRead()
		watch.Wait()
	}()

	prepared, err := s.Prepare(ctx, store.PrepareParams{
		Shard:          p.Shard,
		AttemptKey:     idempotencyKey(ctx),
		MaxGenerations: p.MaxGenerations,
		MaxBytes:       p.MaxBytes,
		Progress: func(done, total int) {
			firstRead()
			call.rep.running()
			call.rep.progress(contract.PrepareProgress{State: contract.ActivityStateRunning, Done: done, Total: total})
		},
	})
	if err != nil {
		log.Warn("prepare failed", zap.Error(err))
		return res, err
	}
	if prepared == nil {
		outcome = "empty"
		return res, nil
	}
	log.Info("merge prepared",
		zap.Uint64("generation", prepared.Through),
		zap.Int("generations", len(prepared.Generations)),
		zap.Int64("rows", prepared.Rows),
		zap.Int64("bytes", prepared.Bytes))
	res.Prepared = preparedToWire(prepared)
	return res, nil
}

// watchBudget reports a budget wait while nothing has been read.
//
// REQUIRES: a.DB is set (Prepare opened its store).
func (a *Activities) watchBudget(rep *reporter, firstRead <-chan struct{}) {
	budget := a.DB.Options().Budget
	if budget == nil {
		return
	}
	t := time.NewTicker(budgetWaitHint / 4)
	defer t.Stop()
	started := time.Now()
	for {
		select {
		case <-firstRead:
			return
		case <-t.C:
			if time.Since(started) >= budgetWaitHint && budget.Waiting() > 0 {
				rep.waitingBudget()
				rep.progress(contract.PrepareProgress{State: contract.ActivityStateWaitingBudget})
				return
			}
		}
	}
}

// Abort deletes an uncommitted preparation's staged files, or finds its commit present.
func (a *Activities) Abort(ctx context.Context, p contract.AbortParams) (res contract.AbortResult, err error) {
	defer a.done(contract.AbortActivity, kindOf(p.Prepared.Target), time.Now(), "ok", &err)

	s, t, err := a.open(ctx, p.Prepared.Target)
	if err != nil {
		return res, err
	}
	ar, err := s.Abort(ctx, preparedFromWire(&p.Prepared))
	if err != nil {
		return res, err
	}
	a.logger().Info("merge aborted", zap.String("target", t.String()), zap.String("shard", p.Prepared.Shard),
		zap.Uint64("generation", p.Prepared.Through), zap.Int("deleted", ar.Deleted),
		zap.Bool("commit_present", ar.CommitPresent), zap.Bool("committed_by_another", ar.CommittedByAnother))
	return contract.AbortResult(ar), nil
}

// CommitRound publishes the prepared merges of several shards of one table in one base
// version and drains each shard, on the shared queue since a round spans owners. Retrying is
// safe (published shards come back already committed); a stale shard is reported, not an
// error, so the workflow aborts and prepares it again.
func (a *Activities) CommitRound(ctx context.Context, p contract.CommitRoundParams) (res contract.CommitRoundResult, err error) {
	ctx, call := a.beginStoreCall(ctx, contract.CommitRoundActivity, p.NotifyAfter, nil)
	defer func() { err = call.end(kindOf(p.Target), "ok", err) }()

	s, t, err := a.open(ctx, p.Target)
	if err != nil {
		return res, err
	}
	ps := make([]*store.PreparedMerge, len(p.Prepared))
	for i := range p.Prepared {
		ps[i] = preparedFromWire(&p.Prepared[i])
	}
	rr, err := s.CommitRound(ctx, ps)
	log := a.logger().With(zap.String("target", t.String()), zap.Int("shards", len(ps)),
		zap.String("workflow_id", activity.GetInfo(ctx).WorkflowExecution.ID))
	if err != nil {
		log.Warn("round commit failed", zap.Error(err))
		return res, err
	}
	res.BaseVersion = rr.BaseVersion
	res.Shards = make([]contract.RoundShardResult, len(rr.Shards))
	stale := 0
	for i, sr := range rr.Shards {
		res.Shards[i] = contract.RoundShardResult{
			Shard: sr.Shard, Outcome: sr.Outcome, BaseVersion: sr.BaseVersion,
			Reclaimed: sr.Reclaimed, Reason: sr.Reason,
		}
		if sr.Outcome == store.RoundStale {
			stale++
		}
	}
	log.Info("merge round committed", zap.Uint64("base_version", rr.BaseVersion), zap.Int("stale", stale),
		zap.Duration("lock_hold", rr.LockHold))
	return res, nil
}
