package workflows

import (
	"cmp"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// Round commits (docs/DESIGN.md §3, docs/TEMPORAL.md "Round commits"): one commit in flight
// per table, covering the prepared passes of every shard ready when it starts, so a table's
// fold rate grows with its shards. Shard passes run as coroutines that prepare and queue their
// commit, so prepares go on while a round commits.

// roundCommitLoop is the only place commits run: it waits for one request (a hot run's whole
// round, awaitRound), takes every other one queued up to the round's caps and commits them in
// one CommitRound; one that would pass contract.MaxRoundBytes waits for the next round.
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

// commitRound runs one CommitRound on the shared queue (it spans owners) and replies to each
// request with its shard's outcome, or the activity's error when it fails for good.
func (r *mergeRun) commitRound(ctx workflow.Context, batch []*commitRequest) {
	params := contract.CommitRoundParams{Target: r.target.String(), Prepared: make([]contract.PreparedMerge, len(batch)),
		NotifyAfter: r.tr.slotWait}
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
		out := commitOutcome{err: err}
		if err == nil {
			out = roundShardOutcome(res.Shards[i])
		}
		req.reply.Send(ctx, out)
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
