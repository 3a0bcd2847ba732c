// Package activities adapts store/ to Temporal: one params struct in, one result struct out,
// heartbeats for anything long, and store error marks mapped onto Temporal error types in one
// place (errors.go); the contract it implements is package contract.
package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Activities holds the dependencies of every walkeeper activity, one per worker process.
type Activities struct {
	// DB is the process's store handle.
	DB *store.DB
	// Logger may be nil (no logs).
	Logger *zap.Logger
	// Metrics may be nil (no metrics).
	Metrics Metrics
	// Client starts workflows (StartWorkflows) and tells workflows what their activities are
	// waiting for (contract.ActivityStateSignal). Without it StartWorkflows fails as
	// misconfigured and the status query cannot show a budget wait or a retry backoff.
	Client client.Client
	// StartConcurrency bounds the starts one StartWorkflows activity has in flight
	// (0 = DefaultStartConcurrency; at most MaxStartConcurrency, checked by the worker's
	// configuration; a larger value is clamped).
	StartConcurrency int
	// RunTimeout is the run timeout of the MergeWal and CompactBase runs StartWorkflows
	// starts (0 = contract.DefaultMergeRunTimeout; bounds checked by the worker's
	// configuration).
	RunTimeout time.Duration
	// FairnessWeights are the kinds' fairness weights StartWorkflows puts in the MergeWal
	// inputs it starts (nil = every kind at contract.DefaultFairnessWeight).
	FairnessWeights contract.FairnessWeights
}

// Metrics receives one observation per activity execution. outcome is "ok", "empty" (a
// Prepare that found nothing pending) or the Temporal error type of the failure; kind is
// "" when the activity spans kinds. Implementations must be cheap and concurrency-safe.
type Metrics interface {
	ActivityDone(activity string, kind store.Kind, outcome string, d time.Duration)
}

// Register registers every activity of a on r under its explicit name (contract/names.go).
func Register(r worker.ActivityRegistry, a *Activities) {
	reg := func(fn any, name string) {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	reg(a.ListPendingShards, contract.ListPendingShardsActivity)
	reg(a.Prepare, contract.PrepareActivity)
	reg(a.CommitRound, contract.CommitRoundActivity)
	reg(a.Abort, contract.AbortActivity)
	reg(a.CompactBase, contract.CompactBaseActivity)
	reg(a.StartWorkflows, contract.StartWorkflowsActivity)
	reg(a.ScanDemand, contract.ScanDemandActivity)
	reg(a.ReconcilePage, contract.ReconcilePageActivity)
	reg(a.RecordMaintenance, contract.RecordMaintenanceActivity)
}

func (a *Activities) logger() *zap.Logger {
	if a.Logger == nil {
		return zap.NewNop()
	}
	return a.Logger
}

// positiveOr is an optional count: v capped at hi, or def (at most hi) when v is not positive.
func positiveOr(v, def, hi int) int {
	if v <= 0 {
		return def
	}
	return min(v, hi)
}

// open parses target and opens its store.
func (a *Activities) open(ctx context.Context, target string) (*store.Store, store.Target, error) {
	t, err := store.ParseTarget(target)
	if err != nil {
		return nil, store.Target{}, err
	}
	if a.DB == nil {
		return nil, t, errMisconfigured("activities have no store DB")
	}
	s, err := a.DB.Open(ctx, t)
	if errors.Is(err, store.ErrNotFound) {
		return nil, t, errStoreNotFound(t)
	}
	return s, t, err
}

// demandCleanTimeout bounds one best-effort demand clean-up (a missing store's, or an idle
// one's in ListPendingShards, a 30 s local activity); the next sweep round's run deletes what
// it leaves.
const demandCleanTimeout = 10 * time.Second

// openDemanded is open for an activity the sweep starts from the demand index, deleting a
// missing store's demand records (best effort) so that no sweep round starts it again.
func (a *Activities) openDemanded(ctx context.Context, target string) (*store.Store, store.Target, error) {
	s, t, err := a.open(ctx, target)
	if s == nil && err != nil && ErrorType(err) == contract.ErrTypeStoreNotFound {
		cctx, cancel := context.WithTimeout(ctx, demandCleanTimeout)
		n, cerr := a.DB.CleanMissingStoreDemand(cctx, t)
		cancel()
		if cerr != nil && ctx.Err() == nil {
			a.logger().Warn("demand clean-up of a missing store failed", zap.String("target", t.String()), zap.Error(cerr))
		} else if n > 0 {
			a.logger().Info("deleted the demand records of a missing store", zap.String("target", t.String()), zap.Int("records", n))
		}
	}
	return s, t, err
}

// kindOf is target's kind for the activity metrics, "" when it does not parse.
func kindOf(target string) store.Kind {
	t, _ := store.ParseTarget(target)
	return t.Kind
}

// idempotencyKey is the store's AttemptKey for the running attempt, workflow ID + "/" +
// activity ID: the same across retries (and across a reset, since workflows embed the
// original run ID in activity IDs) and distinct between activities; outside a workflow, the
// activity run ID.
func idempotencyKey(ctx context.Context) string {
	info := activity.GetInfo(ctx)
	if info.WorkflowExecution.ID == "" {
		return "standalone/" + info.ActivityID + "/" + info.ActivityRunID
	}
	return info.WorkflowExecution.ID + "/" + info.ActivityID
}

// done records metrics for one execution since start and maps *err (see errors.go); an
// activity defers it with its result error.
func (a *Activities) done(name string, kind store.Kind, start time.Time, outcome string, err *error) {
	*err = ToTemporal(*err)
	if a.Metrics != nil {
		if *err != nil {
			outcome = ErrorType(*err)
		}
		a.Metrics.ActivityDone(name, kind, outcome, time.Since(start))
	}
}

var errWorkerStopping = errors.New("worker is shutting down")

// storeCall is the frame the long store-calling activities run in: a context that is also
// cancelled when the worker starts shutting down (so a long store call ends early and
// Temporal retries it on another worker), the liveness reporter, and the metric and error
// mapping (a.done).
type storeCall struct {
	a      *Activities
	name   string
	start  time.Time
	ctx    context.Context
	cancel context.CancelCauseFunc
	ended  chan struct{}
	rep    *reporter
}

// beginStoreCall starts the frame; the activity defers end with its result error.
func (a *Activities) beginStoreCall(ctx context.Context, name string, notifyAfter time.Duration, details any) (context.Context, *storeCall) {
	c := &storeCall{a: a, name: name, start: time.Now(), ended: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	stop := activity.GetWorkerStopChannel(c.ctx)
	go func() {
		select {
		case <-stop:
			c.cancel(errWorkerStopping)
		case <-c.ended:
		}
	}()
	c.rep = a.startReporter(c.ctx, notifyAfter, details)
	return c.ctx, c
}

// end maps err (errWorkerStopping when the worker's stop cancelled it), records the outcome
// for kind and stops the reporter, and returns the error to return.
func (c *storeCall) end(kind store.Kind, outcome string, err error) error {
	close(c.ended)
	if errors.Is(context.Cause(c.ctx), errWorkerStopping) && errors.Is(err, context.Canceled) {
		err = errWorkerStopping
	}
	c.cancel(nil)
	c.a.done(c.name, kind, c.start, outcome, &err)
	c.rep.finish(err)
	return err
}

// recovering runs fn, which runs in a goroutine an activity started: the SDK recovers only
// the activity's own goroutine, so a panic of fn would end the process. It is logged with its
// stack, counted (store.RecoveredPanics) and returned as fn's error, an Internal failure.
func (a *Activities) recovering(where string, fn func() error) (err error) {
	defer store.RecoverTo(a.logger(), where, &err)
	return fn()
}
