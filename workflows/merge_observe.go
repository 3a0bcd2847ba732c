package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// What a merge tells Temporal visibility about itself (docs/TEMPORAL.md "What a merge
// shows"):
//   - WalTrigger is upserted (TriggerUnknown) when the start did not set it, in the same
//     upsert as the missing WalTarget/WalKind of a bare start;
//   - WalPendingAtStart rides the first WalPending upsert of the chain;
//   - once the merge has finished, one upsert sets WalReclaimed and WalBytesMerged (with
//     WalPending when it moved) and one memo update repeats them with the passes for
//     display, and the current details say the outcome in words;
//   - Prepare, CommitRound and Abort carry summaries naming the shards and the passes.
//
// None of it costs a pass anything: every command is once per run (the start) or per chain
// (the end).

// noteStart keeps the first listing's total as the chain's pending at start.
func (r *mergeRun) noteStart() {
	if r.pendingAtStart < 0 {
		r.pendingAtStart = r.totalPending()
	}
}

// recordOutcome writes the finished merge's figures to its search attributes and memo.
// A failure to record is logged, never fails the merge.
func (r *mergeRun) recordOutcome(res contract.MergeWalResult) {
	updates := []temporal.SearchAttributeUpdate{
		contract.WalPendingAtStart.ValueSet(int64(res.PendingAtStart)),
		contract.WalReclaimed.ValueSet(int64(res.Reclaimed)),
		contract.WalBytesMerged.ValueSet(float64(res.BytesMerged)),
	}
	if total := int64(r.totalPending()); total != r.lastPending {
		updates = append(updates, contract.WalPending.ValueSet(total))
		r.lastPending = total
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, updates...); err != nil {
		r.log.Warn("Cannot record the merge's outcome in its search attributes.", "error", err)
	}
	memo := map[string]any{
		contract.MemoTrigger:        contract.TriggerOrUnknown(r.in.Trigger),
		contract.MemoPendingAtStart: res.PendingAtStart,
		contract.MemoReclaimed:      res.Reclaimed,
		contract.MemoBytesMerged:    res.BytesMerged,
		contract.MemoPasses:         res.Passes,
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
	failed := 0
	for _, sh := range res.Shards {
		if sh.Error != "" {
			failed++
		}
	}
	line := fmt.Sprintf("**%s** done — %s, %s reclaimed, %s in %s",
		res.Target, plural(len(res.Shards), "shard"), plural(res.Reclaimed, "generation"),
		formatBytes(res.BytesMerged), plural(res.Passes, "pass"))
	if failed > 0 {
		line += fmt.Sprintf(", %d failed", failed)
	}
	line += fmt.Sprintf("\n\n%d pending at start · triggered by %s",
		res.PendingAtStart, contract.TriggerWords(r.in.Trigger, r.in.TriggerReason))
	if res.WorkflowRuns > 1 {
		line += fmt.Sprintf(" · %d workflow runs", res.WorkflowRuns)
	}
	for _, sh := range res.Shards {
		if sh.Error != "" {
			line += fmt.Sprintf("\n\nshard `%s` failed: %s", contract.ShardLabel(sh.Shard), sh.Error)
		}
	}
	return line
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

// roundSummary names a CommitRound in Temporal Web by the shards and passes it commits:
// "commit round: shard 3f2a pass 2, shard 9c01 pass 1". At most roundSummaryShards are named
// (a round holds up to contract.MaxRoundShards), the rest counted.
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

// formatBytes is b in binary units with one decimal: "512 B", "12.0 MiB". Pure.
func formatBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}

// listFailure is the workflow's failure when the first listing failed. A missing store fails
// the run with the activity's one line (StoreNotFound, non-retryable) instead of the
// activity failure wrapped around it, so Temporal Web and `walkeeper merge --wait` show
// "store generic:nope does not exist; create it with: curl -XPOST http://<worker>/api/v1/stores/generic/nope ..."
// (contract.MissingStoreMessage, the same line the CLI's pre-check says).
func (r *mergeRun) listFailure(err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == contract.ErrTypeStoreNotFound {
		return temporal.NewNonRetryableApplicationError(appErr.Message(), contract.ErrTypeStoreNotFound, nil)
	}
	return err
}
