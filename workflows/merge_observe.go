package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// What a merge tells Temporal visibility about itself, at the fewest billable actions
// (docs/TEMPORAL.md "What a merge shows", decision 0321).

// actions is the billable actions of the chain so far as the workflow counts them: earlier
// runs', this run's start, its tracker's, upserts and timers.
func (r *mergeRun) actions() int {
	n := 1 + r.tr.actions + r.upserts + r.timers
	if r.in.Carry != nil {
		n += r.in.Carry.Actions
	}
	return n
}

// finish ends a run that drained its merge, counting the outcome's upsert first so the
// details, memo and result all say the chain's final action count.
func (r *mergeRun) finish() contract.MergeWalResult {
	r.upserts++
	r.setPhase(contract.PhaseDone)
	res := r.result()
	r.recordOutcome(res)
	return res
}

// recordOutcome writes the finished merge's figures to its search attributes and memo.
// A failure to record is logged, never fails the merge.
func (r *mergeRun) recordOutcome(res contract.MergeWalResult) {
	err := workflow.UpsertTypedSearchAttributes(r.ctx,
		contract.WalPendingAtStart.ValueSet(int64(res.PendingAtStart)),
		contract.WalReclaimed.ValueSet(int64(res.Reclaimed)),
		contract.WalBytesMerged.ValueSet(float64(res.BytesMerged)),
		contract.WalPending.ValueSet(int64(r.totalPending())),
	)
	if err != nil {
		r.log.Warn("Cannot record the merge's outcome in its search attributes.", "error", err)
	}
	memo := map[string]any{
		contract.MemoTrigger:        contract.TriggerOrUnknown(r.in.Trigger),
		contract.MemoPendingAtStart: res.PendingAtStart,
		contract.MemoReclaimed:      res.Reclaimed,
		contract.MemoBytesMerged:    res.BytesMerged,
		contract.MemoPasses:         res.Passes,
		contract.MemoActions:        res.Actions,
	}
	if r.in.TriggerReason != "" {
		memo[contract.MemoTriggerReason] = r.in.TriggerReason
	}
	if err := workflow.UpsertMemo(r.ctx, memo); err != nil {
		r.log.Warn("Cannot record the merge's outcome in its memo.", "error", err)
	}
}

// outcomeDetails is the current details of a finished run, in words:
// "**generic:demo** done — 4 shards, 37 generations reclaimed, 12.0 MiB in 3 passes".
func (r *mergeRun) outcomeDetails() string {
	if r.pendingAtStart < 0 {
		return fmt.Sprintf("**%s** stopped before its shards were listed (see the failure).", r.target)
	}
	res := r.result()
	failed, listed, failures := 0, 0, ""
	for _, sh := range r.shards {
		if sh.res.Error != "" {
			failed++
		}
	}
	for _, sh := range res.Shards {
		if sh.Error != "" {
			listed++
			failures += fmt.Sprintf("\n\nshard `%s` failed: %s", contract.ShardLabel(sh.Shard), sh.Error)
		}
	}
	if listed < failed {
		failures += fmt.Sprintf("\n\nand %s more", plural(failed-listed, "failed shard"))
	}
	line := fmt.Sprintf("**%s** done — %s, %s reclaimed, %s in %s",
		res.Target, plural(len(r.shards), "shard"), plural(res.Reclaimed, "generation"),
		contract.FormatBytes(res.BytesMerged), plural(res.Passes, "pass"))
	if failed > 0 {
		line += fmt.Sprintf(", %d failed", failed)
	}
	line += fmt.Sprintf("\n\n%d pending at start · triggered by %s",
		res.PendingAtStart, contract.TriggerWords(r.in.Trigger, r.in.TriggerReason))
	if res.WorkflowRuns > 1 {
		line += fmt.Sprintf(" · %d workflow runs", res.WorkflowRuns)
	}
	return line + " · " + plural(res.Actions, "Temporal action") + failures
}

// activitySummary names an activity in Temporal Web by shard and pass: "prepare shard 3f2a
// pass 2".
func (r *mergeRun) activitySummary(kind string, sh *shardRun, shared bool) string {
	s := fmt.Sprintf("%s shard %s pass %d", kind, contract.ShardLabel(sh.res.Shard), sh.res.Passes+1)
	if shared {
		s += " (shared queue)"
	}
	return s
}

// roundSummary names a CommitRound in Temporal Web by the shards and passes it commits ("commit
// round: shard 3f2a pass 2, shard 9c01 pass 1"), at most roundSummaryShards, the rest counted.
func (r *mergeRun) roundSummary(batch []*commitRequest) string {
	var b strings.Builder
	b.WriteString("commit round:")
	for i, req := range batch {
		if i == roundSummaryShards {
			fmt.Fprintf(&b, " +%d more", len(batch)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " shard %s pass %d", contract.ShardLabel(req.sh.res.Shard), req.sh.res.Passes+1)
	}
	return b.String()
}

const roundSummaryShards = 8

// plural is "1 pass", "3 passes", "2 shards". Pure.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if noun == "pass" {
		return fmt.Sprintf("%d passes", n)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listFailure is the workflow's failure when the first listing failed: a missing store fails
// the run with the activity's one line (contract.MissingStoreMessage), not the wrapped failure.
func (r *mergeRun) listFailure(err error) error {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.Type() == contract.ErrTypeStoreNotFound {
		return temporal.NewNonRetryableApplicationError(appErr.Message(), contract.ErrTypeStoreNotFound, nil)
	}
	return err
}
