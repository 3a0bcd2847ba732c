package activities

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// DefaultStartConcurrency and MaxStartConcurrency are the default and bound of the starts one
// StartWorkflows has in flight: one after another could not keep up with a sweep's plan, and
// the sweep's Concurrency batches multiply the burst.
const (
	DefaultStartConcurrency = 32
	MaxStartConcurrency     = 256
)

// maxStartFailuresLogged bounds the failed starts one StartWorkflows logs one by one; the
// rest are counted in one line (each outcome carries its error anyway).
const maxStartFailuresLogged = 3

// StartMetrics is implemented by a Metrics that also counts StartWorkflows' starts by trigger,
// since a start that never succeeds would otherwise only be logged.
type StartMetrics interface {
	WorkflowStart(trigger string, err error)
}

// StartWorkflows starts (or attaches to) one workflow per request through the contract's
// start helpers, so its starts dedupe with every other trigger, at most a.StartConcurrency at
// once, each reporting its own outcome in request order. It fails only when every start
// failed: retryable unless each was refused for good (non-retryable StartFailed).
func (a *Activities) StartWorkflows(ctx context.Context, p contract.StartWorkflowsParams) (res contract.StartWorkflowsResult, err error) {
	defer a.done(contract.StartWorkflowsActivity, "", time.Now(), "ok", &err)
	if a.Client == nil {
		return res, errMisconfigured("activities have no Temporal client")
	}
	// Starts wait on a busy frontend up to the SDK's RPC timeout each, batch after batch.
	rep := a.startReporter(ctx, 0, nil)
	defer rep.finish(nil)
	res.Outcomes = make([]contract.StartOutcome, len(p.Starts))
	errs := make([]error, len(p.Starts))
	var g errgroup.Group
	var logged atomic.Int32
	g.SetLimit(positiveOr(a.StartConcurrency, DefaultStartConcurrency, MaxStartConcurrency))
	for i, req := range p.Starts {
		g.Go(func() error {
			o := contract.StartOutcome{Workflow: req.Workflow, Target: req.Target}
			err := a.recovering("workflow start", func() (err error) {
				o.WorkflowID, o.RunID, err = a.startOne(ctx, req)
				return err
			})
			if m, ok := a.Metrics.(StartMetrics); ok {
				m.WorkflowStart(req.Trigger, err)
			}
			if err != nil {
				o.Error = contract.StartErrorText(err.Error())
				errs[i] = err
				if logged.Add(1) <= maxStartFailuresLogged {
					a.logger().Warn("workflow start failed", zap.String("workflow", req.Workflow),
						zap.String("target", req.Target), zap.Error(err))
				}
			}
			res.Outcomes[i] = o
			return nil
		})
	}
	_ = g.Wait() // every Go returns nil: a start's error is in its outcome
	failed, again := 0, false
	var lastErr error
	for _, err := range errs {
		if err != nil {
			failed++
			lastErr = err
			again = again || !RefusedForGood(err)
		}
	}
	if failed > 0 {
		a.logger().Warn("workflow starts failed", zap.Int("failed", failed), zap.Int("starts", len(p.Starts)),
			zap.Int("logged", min(failed, maxStartFailuresLogged)), zap.Error(lastErr))
	}
	if len(p.Starts) > 0 && failed == len(p.Starts) {
		// No attempt would start anything when every start was refused for good.
		return res, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("all %d starts failed, last: %v", failed, lastErr), contract.ErrTypeStartFailed,
			temporal.ApplicationErrorOptions{Cause: lastErr, NonRetryable: !again})
	}
	return res, nil
}

func (a *Activities) startOne(ctx context.Context, req contract.StartRequest) (id, runID string, err error) {
	t, err := store.ParseTarget(req.Target)
	if err != nil {
		return "", "", err
	}
	// a.RunTimeout, or the default when it is not positive.
	runTimeout := contract.RunTimeout(cmp.Or(max(a.RunTimeout, 0), contract.DefaultMergeRunTimeout))
	var run client.WorkflowRun
	id = contract.MergeWalID(t)
	switch req.Workflow {
	case contract.MergeWalWorkflow:
		run, err = contract.StartMergeWal(ctx, a.Client, t, contract.MergeWalInput{ParallelPrepare: req.ParallelPrepare,
			Trigger: req.Trigger, TriggerReason: req.Reason, Urgent: req.Urgent,
			FairnessWeight: a.FairnessWeights.Weight(t.Kind)}, runTimeout, contract.PendingAtStart(req.Pending))
	case contract.CompactBaseWorkflow:
		id = contract.CompactID(t)
		run, err = contract.StartCompactBase(ctx, a.Client, t, contract.CompactBaseInput{
			Trigger: req.Trigger, TriggerReason: req.Reason}, runTimeout)
	default:
		return "", "", fmt.Errorf("unknown workflow %q: %w", req.Workflow, store.ErrInvalidInput)
	}
	if err != nil {
		return id, "", err
	}
	return run.GetID(), run.GetRunID(), nil
}
