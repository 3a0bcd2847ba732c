package workflows

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// listingOf is one listing of contract.MaxListedShards shards, from the from-th shard on.
func listingOf(from int) []contract.ShardPending {
	out := make([]contract.ShardPending, 0, contract.MaxListedShards)
	for i := from; i < from+contract.MaxListedShards; i++ {
		out = append(out, contract.ShardPending{Shard: fmt.Sprintf("%036d", i), Pending: 3})
	}
	return out
}

func planRun(ctx workflow.Context, bounded bool, carry *contract.MergeWalCarry) *mergeRun {
	return &mergeRun{ctx: ctx, target: target.Target{Kind: target.KindGeneric, Name: "gs"}, tr: &tracker{onChange: func() {}}, workflowRun: 1, shardsBounded: bounded,
		in: contract.MergeWalInput{Target: "generic:gs", Carry: carry}, log: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}
}

// inWorkflow runs body as a workflow of the test environment (plan sets the run's details).
func inWorkflow(t *testing.T, body func(ctx workflow.Context)) {
	t.Helper()
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		body(ctx)
		return nil
	}, workflow.RegisterOptions{Name: "plan-test"})
	env.ExecuteWorkflow("plan-test")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// TestMergeWalPlanBoundedAtScale: a chain whose listings (each at most MaxListedShards, the
// oldest first) name more distinct shards than MaxCarriedShards, as they do when merged shards
// drop out and older ones move in, holds at most MaxCarriedShards, so its continue-as-new
// passes the next run's input check; the shards left out are planned by the next MergeWal,
// which starts without a carry.
func TestMergeWalPlanBoundedAtScale(t *testing.T) {
	inWorkflow(t, func(ctx workflow.Context) { planBoundedAtScale(t, ctx) })
}

func planBoundedAtScale(t *testing.T, ctx workflow.Context) {
	r := planRun(ctx, true, nil)
	r.plan(listingOf(0))
	for from := contract.MaxListedShards / 2; from < 3*contract.MaxCarriedShards; from += contract.MaxListedShards / 2 {
		// The shards merged since the last listing are drained; the listing moves on.
		for _, sh := range r.todo() {
			sh.res.Passes++
		}
		r.plan(listingOf(from))
		require.LessOrEqual(t, len(r.shards), contract.MaxCarriedShards)
		next := contract.MergeWalInput{Target: "generic:gs", Carry: r.carry(carryJSONCut)}
		require.NoError(t, next.WithDefaults().Validate(), "carry after listing from shard %d", from)
	}
	require.Len(t, r.shards, contract.MaxCarriedShards)

	// The run continues as new: the carried shards stay; the new ones wait.
	cont := planRun(ctx, true, r.carry(carryJSONCut))
	last := listingOf(3 * contract.MaxCarriedShards)
	cont.plan(last)
	require.Len(t, cont.shards, contract.MaxCarriedShards)
	require.Empty(t, cont.todo(), "no room: a later listing's shards are left to the next MergeWal")

	// The next MergeWal (the sweep starts it while the store has debt) plans them.
	fresh := planRun(ctx, true, nil)
	fresh.plan(last)
	require.Len(t, fresh.todo(), contract.MaxListedShards)
}

// TestMergeWalPlanUnboundedBeforeTheGate: a run that started before merge-shards-bounded keeps
// adding every listed shard, as it did (its history replays).
func TestMergeWalPlanUnboundedBeforeTheGate(t *testing.T) {
	inWorkflow(t, func(ctx workflow.Context) {
		r := planRun(ctx, false, nil)
		for from := 0; from <= contract.MaxCarriedShards; from += contract.MaxListedShards {
			r.plan(listingOf(from))
		}
		require.Len(t, r.shards, contract.MaxCarriedShards+contract.MaxListedShards)
	})
}
