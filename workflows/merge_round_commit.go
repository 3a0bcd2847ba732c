package workflows

import (
	"cmp"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// Round commits (docs/DESIGN.md §3, docs/TEMPORAL.md "Round commits"). One commit in flight
// per table, and one commit covers the prepared passes of every shard that is ready
// when it starts (up to MaxShardsPerCommit and contract.MaxRoundBytes of input), in one base
// version: the CommitRound activity. A table's fold rate then grows with its shards instead
// of being one shard's pass per commit's orchestration (~0.4 s on the dev server).
//
// The shard passes of a round run as coroutines: each prepares (behind the prepare
// semaphore: PrepareConcurrency with ParallelPrepare, else one at a time) and then queues its
// commit, so prepares of the next shards go on while a round commit runs, and the commit
// loop takes everything queued meanwhile as its next round. What a shard's pass does with
// the outcome: a stale shard is aborted and prepared again (mergePass).

// roundCommitLoop is the only place commits run: it waits for one commit request (in a hot
// run, for the round's, awaitRound), then takes every other request already queued, up to
// the round's caps, and commits them all in one CommitRound. A request that would take the
// round past contract.MaxRoundBytes waits for the next round (at least one request always
// goes).
func (r *mergeRun) roundCommitLoop(ctx workflow.Context, commits workflow.Channel) {
	limit := cmp.Or(r.in.MaxShardsPerCommit, contract.MaxRoundShards) // 0 = contract.MaxRoundShards
	var carry *commitRequest
	for {
		first := carry
		carry = nil
		if first == nil {
			if !commits.Receive(ctx, &first) {
				return
			}
			r.asking--
		}
		r.awaitRound(ctx, limit)
		batch := []*commitRequest{first}
		size := preparedSize(first.p)
		for len(batch) < limit {
			var next *commitRequest
			if !commits.ReceiveAsync(&next) {
				break
			}
			r.asking--
			n := preparedSize(next.p)
			if size+n > contract.MaxRoundBytes {
				carry = next
				break
			}
			size += n
			batch = append(batch, next)
		}
		r.commitRound(ctx, batch)
	}
}

// preparedSize is the encoded size of p in the activity input (deterministic: a struct of
// scalars and slices, no maps).
func preparedSize(p *contract.PreparedMerge) int {
	raw, err := json.Marshal(p)
	if err != nil {
		return contract.MaxRoundBytes // cannot happen; a round of its own
	}
	return len(raw)
}

// commitRound runs one CommitRound on the shared queue (a round spans shards of different
// owners; nothing in it needs an owner's memory) and replies to each request with its
// shard's outcome: committed (or already committed) as its RoundShardResult, stale as a
// StalePreparation error. If the activity fails for good, every request gets its error.
func (r *mergeRun) commitRound(ctx workflow.Context, batch []*commitRequest) {
	params := contract.CommitRoundParams{Target: r.target.String(), Prepared: make([]contract.PreparedMerge, len(batch)),
		NotifyAfter: r.tr.notifyAfter()}
	for i, req := range batch {
		req.sh.phase = contract.ShardCommitting
		params.Prepared[i] = *req.p
	}
	r.current = batch[0].sh
	r.changed()
	var res contract.CommitRoundResult
	w := r.tr.newWatch(contract.CommitRoundActivity, "", contract.TaskQueue)
	err := r.tr.exec(ctx, r.prioritized(commitRoundOptions(r.roundSummary(batch))), w, params, &res)
	if err == nil && len(res.Shards) != len(batch) {
		err = temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("round commit answered for %d shards, asked for %d", len(res.Shards), len(batch)),
			contract.ErrTypeInternal, nil)
	}
	for i, req := range batch {
		if err != nil {
			req.reply.Send(ctx, commitOutcome{err: err})
			continue
		}
		req.reply.Send(ctx, roundShardOutcome(res.Shards[i]))
	}
}

// roundShardOutcome turns one shard's part of a round into its pass's commit outcome.
func roundShardOutcome(sr contract.RoundShardResult) commitOutcome {
	switch sr.Outcome {
	case contract.RoundCommitted, contract.RoundAlreadyCommitted:
		return commitOutcome{res: sr}
	case contract.RoundStale:
		return commitOutcome{err: temporal.NewApplicationError(
			fmt.Sprintf("shard %s: %s", sr.Shard, sr.Reason), contract.ErrTypeStalePreparation)}
	}
	return commitOutcome{err: temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("shard %s: unknown round outcome %q", sr.Shard, sr.Outcome), contract.ErrTypeInternal, nil)}
}
