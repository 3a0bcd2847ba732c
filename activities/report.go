package activities

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
)

// reporter keeps one activity execution visible: it heartbeats the latest progress on a
// ticker (a third of the heartbeat timeout), so long store calls neither time out nor miss a
// cancellation while every heartbeat, a billed action, is spent only per tick; and, when the
// workflow asked (NotifyAfter), it signals the few states a workflow cannot observe, the
// budget wait and a retry backoff, in order from one goroutine so a slow frontend never
// stalls the store call.
type reporter struct {
	ctx  context.Context
	info activity.Info
	a    *Activities

	mu      sync.Mutex
	details any
	state   string // last state signalled, "" = none
	// signals queues the states to signal: nil when the workflow did not ask (NotifyAfter),
	// and from finish on.
	signals chan contract.ActivityState

	stop chan struct{}
	wg   sync.WaitGroup
	sent chan struct{}
}

// signalTimeout bounds one signal; a lost signal only makes the status less precise.
const signalTimeout = 5 * time.Second

func (a *Activities) startReporter(ctx context.Context, notifyAfter time.Duration, details any) *reporter {
	info := activity.GetInfo(ctx)
	r := &reporter{
		ctx:     ctx,
		info:    info,
		a:       a,
		details: details,
		stop:    make(chan struct{}),
	}
	if info.HeartbeatTimeout > 0 {
		every := max(info.HeartbeatTimeout/3, 100*time.Millisecond)
		r.wg.Go(func() { r.heartbeatLoop(every) })
	}
	if a.Client == nil || notifyAfter <= 0 || info.WorkflowExecution.ID == "" {
		return r
	}
	r.signals = make(chan contract.ActivityState, 8)
	r.sent = make(chan struct{})
	go r.sendLoop(r.signals)
	if info.Attempt > 1 {
		// The workflow may be showing the backoff of the previous attempt.
		r.signal(contract.ActivityStateRunning, "", func(string) bool { return true })
	}
	return r
}

func (r *reporter) heartbeatLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.mu.Lock()
			d := r.details
			r.mu.Unlock()
			if d == nil {
				activity.RecordHeartbeat(r.ctx)
			} else {
				activity.RecordHeartbeat(r.ctx, d)
			}
		case <-r.stop:
			return
		}
	}
}

// progress records new heartbeat details; the next tick of the heartbeat loop sends them.
func (r *reporter) progress(details any) {
	r.mu.Lock()
	r.details = details
	r.mu.Unlock()
}

// waitingBudget tells the workflow the activity waits for the memory budget.
func (r *reporter) waitingBudget() {
	r.signal(contract.ActivityStateWaitingBudget, "", func(prev string) bool {
		return prev != contract.ActivityStateWaitingBudget
	})
}

// running tells the workflow the budget wait is over (only if it was told about it).
func (r *reporter) running() {
	r.signal(contract.ActivityStateRunning, "", func(prev string) bool {
		return prev == contract.ActivityStateWaitingBudget
	})
}

func (r *reporter) signal(state, errText string, when func(prev string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.signals == nil || !when(r.state) {
		return
	}
	r.state = state
	select {
	case r.signals <- contract.ActivityState{
		ActivityID: r.info.ActivityID,
		State:      state,
		Attempt:    int(r.info.Attempt),
		Error:      errText,
	}:
	default: // queue full: drop; the status is best effort
	}
}

func (r *reporter) sendLoop(signals <-chan contract.ActivityState) {
	defer close(r.sent)
	wf := r.info.WorkflowExecution
	for s := range signals {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), signalTimeout)
		err := r.a.Client.SignalWorkflow(ctx, wf.ID, wf.RunID, contract.ActivityStateSignal, s)
		cancel()
		if err != nil {
			r.a.logger().Debug("activity state signal not delivered",
				zap.String("workflow_id", wf.ID), zap.String("state", s.State), zap.Error(err))
		}
	}
}

// finish stops the reporter, telling the workflow why when err will be retried.
func (r *reporter) finish(err error) {
	close(r.stop)
	r.wg.Wait()
	if r.signals == nil {
		return
	}
	if err != nil && r.willRetry(err) {
		// Each retry's signal is a history event: its text is cut as the workflow keeps it.
		r.signal(contract.ActivityStateRetrying, contract.FailureTextJSON(err.Error()), func(string) bool { return true })
	}
	r.mu.Lock()
	close(r.signals)
	r.signals = nil
	r.mu.Unlock()
	select {
	case <-r.sent:
	case <-time.After(2 * signalTimeout):
	}
}

// willRetry reports whether Temporal will run another attempt after err (a mapped error).
func (r *reporter) willRetry(err error) bool {
	if errors.Is(err, context.Canceled) || errors.As(err, new(*temporal.CanceledError)) {
		return false // the activity was cancelled, not failed
	}
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok && appErr.NonRetryable() {
		return false
	}
	if p := r.info.RetryPolicy; p != nil {
		if p.MaximumAttempts > 0 && r.info.Attempt >= p.MaximumAttempts {
			return false
		}
		if slices.Contains(p.NonRetryableErrorTypes, ErrorType(err)) {
			return false
		}
	}
	return true
}
