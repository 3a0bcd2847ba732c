package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// CompactBase runs one bounded compaction pass over the target's base runs. Each execution
// names its own output run, so a retried or reset one never shares it with one still running.
func (a *Activities) CompactBase(ctx context.Context, p contract.CompactPassParams) (res contract.CompactPassResult, err error) {
	ctx, call := a.beginStoreCall(ctx, contract.CompactBaseActivity, p.NotifyAfter, nil)
	defer func() { err = call.end(kindOf(p.Target), "ok", err) }()

	s, t, err := a.openDemanded(ctx, p.Target)
	if err != nil {
		return res, err
	}
	cr, err := s.CompactBase(ctx, store.CompactParams{MaxRuns: p.MaxRuns, MaxBytes: p.MaxBytes})
	if err != nil {
		return res, err
	}
	a.logger().Info("compaction pass",
		zap.String("target", t.String()),
		zap.String("workflow_id", activity.GetInfo(ctx).WorkflowExecution.ID),
		zap.Bool("committed", cr.Committed), zap.Int("input_runs", cr.InputRuns),
		zap.Int("runs_left", cr.RunsLeft), zap.Uint64("base_version", cr.BaseVersion))
	return contract.CompactPassResult(cr), nil
}
