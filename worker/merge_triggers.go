package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// MergeStarter starts the MergeWal workflow of a target, or attaches to the one running, with
// the start options given; tests inject fakes.
type MergeStarter func(ctx context.Context, t store.Target, in contract.MergeWalInput, with ...contract.StartOption) (client.WorkflowRun, error)

// TemporalMergeStarter returns the MergeStarter that goes through Temporal, with runs timing
// out after runTimeout and a start without a fairness weight taking its kind's from weights.
func TemporalMergeStarter(c client.Client, runTimeout time.Duration, weights contract.FairnessWeights) MergeStarter {
	return func(ctx context.Context, t store.Target, in contract.MergeWalInput, with ...contract.StartOption) (client.WorkflowRun, error) {
		if in.FairnessWeight == 0 {
			in.FairnessWeight = weights.Weight(t.Kind)
		}
		return contract.StartMergeWal(ctx, c, t, in, append([]contract.StartOption{contract.RunTimeout(runTimeout)}, with...)...)
	}
}

// startTimeout bounds one workflow start.
const startTimeout = 10 * time.Second

// A start refused for good (activities.RefusedForGood) is not tried again for that target
// before its backoff ends, refusedBackoffMin doubled per refusal up to refusedBackoffMax,
// which stays inside WalkeeperMergeTriggersFailing's 10m window so the alert keeps firing; of
// more than maxRefusedTargets, the one whose backoff ends first is forgotten.
const (
	refusedBackoffMin = 30 * time.Second
	refusedBackoffMax = 5 * time.Minute
	maxRefusedTargets = 4096
)

// refusal is the backoff of one target whose last start was refused for good.
type refusal struct {
	until time.Time     // no start for the target before this
	delay time.Duration // the backoff that ends at until
}

// maxStartsInFlight bounds concurrent trigger starts per worker; beyond it a start is
// deferred (count trigger: retried after the next flush of that store).
const maxStartsInFlight = 8

// mergeTriggers starts MergeWal for the count trigger (after a seal, at threshold pending
// generations of the own shard) and the debt trigger (an append or delete refused for debt),
// in the background, one start per target at a time, so a slow Temporal never holds a flush or
// an answer. A failed or deferred count start is retried after the store's next successful
// flush, one refused for good not before its backoff ends.
type mergeTriggers struct {
	start      MergeStarter // nil: off (HTTP-only mode)
	threshold  int          // count threshold; 0: count trigger off
	countInput contract.MergeWalInput
	log        *zap.Logger
	metrics    *Metrics
	life       context.Context // ends at Flusher.Stop

	now func() time.Time // the clock of the refusal backoffs

	mu       sync.Mutex
	retry    map[string]bool    // target -> last count start failed or was deferred
	refused  map[string]refusal // target -> its last start was refused for good
	inflight map[string]bool    // target -> a start is running
	stopped  bool               // stop was called: fire launches nothing, whether or not life has ended
	wg       sync.WaitGroup
}

func (tg *mergeTriggers) countEnabled() bool { return tg.start != nil && tg.threshold > 0 }

// afterFlush applies the count trigger to one successful flush and reports whether it started.
func (tg *mergeTriggers) afterFlush(t store.Target, res store.FlushResult) bool {
	if !tg.countEnabled() {
		return false
	}
	key := t.String()
	tg.mu.Lock()
	retry := tg.retry[key]
	if res.Pending < tg.threshold && retry {
		delete(tg.retry, key) // merged meanwhile: nothing left to retry
	}
	tg.mu.Unlock()
	if res.Pending < tg.threshold || (!res.Sealed && !retry) {
		return false
	}
	return tg.fire(TriggerCount, t, res.Pending,
		fmt.Sprintf("own shard %d pending >= merge_after_generations %d", res.Pending, tg.threshold))
}

// crowdedOut reports whether a start for key is declined only for other stores' starts.
func (tg *mergeTriggers) crowdedOut(key string) bool {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return !tg.inflight[key] && len(tg.inflight) >= maxStartsInFlight
}

// fire launches one background start for t unless one runs for it (or too many do) and
// reports whether it did; trigger, TriggerCount or TriggerDebt, is the metric label, reason
// what the run's summary shows.
//
// REQUIRES: tg.start != nil (its callers check it).
func (tg *mergeTriggers) fire(trigger string, t store.Target, pending int, reason string) bool {
	key := t.String()
	tg.mu.Lock()
	if tg.stopped || tg.life.Err() != nil {
		tg.mu.Unlock()
		return false // the worker is stopping: a start now would outlive stop's wait
	}
	if r, ok := tg.refused[key]; ok && tg.now().Before(r.until) {
		tg.mu.Unlock()
		return false // refused for good a moment ago: the count retry waits for the backoff
	}
	if tg.inflight[key] || len(tg.inflight) >= maxStartsInFlight {
		if trigger == TriggerCount && !tg.inflight[key] {
			tg.retry[key] = true
		}
		tg.mu.Unlock()
		return false
	}
	tg.inflight[key] = true
	tg.wg.Add(1) // under mu, so that stop either sees this start or refuses it
	tg.mu.Unlock()
	go func() {
		defer tg.wg.Done()
		ctx, cancel := context.WithTimeout(tg.life, startTimeout)
		defer cancel()
		in := contract.MergeWalInput{Trigger: contract.TriggerBackPressure}
		if trigger == TriggerCount {
			in = tg.countInput
			in.Trigger = contract.TriggerCount
		}
		in.Target, in.TriggerReason, in.Urgent = key, reason, tg.urgent(trigger, pending)
		// The pending count rides the start, where search attributes cost no action.
		// A panic of the start is its error, so that the store's start is no longer in flight.
		var run client.WorkflowRun
		err := func() (err error) {
			defer store.RecoverTo(tg.log, "MergeWal start", &err)
			run, err = tg.start(ctx, t, in, contract.PendingAtStart(pending))
			return err
		}()
		tg.metrics.trigger(trigger, err)
		tg.mu.Lock()
		delete(tg.inflight, key)
		backoff := tg.noteRefusalLocked(key, err)
		if trigger == TriggerCount {
			if err != nil {
				tg.retry[key] = true
			} else {
				delete(tg.retry, key)
			}
		}
		tg.mu.Unlock()
		if err != nil {
			tg.log.Warn("could not start MergeWal", zap.String("trigger", trigger), zap.String("target", key),
				zap.Int("pending", pending), zap.Duration("refused_for_good_backoff", backoff), zap.Error(err))
			return
		}
		tg.log.Info("started MergeWal", zap.String("trigger", trigger), zap.String("target", key),
			zap.Int("pending", pending), zap.String("workflow_id", run.GetID()), zap.String("run_id", run.GetRunID()))
	}()
	return true
}

// noteRefusalLocked records the outcome of a start of key in the refusal backoffs and returns
// the backoff it set (0: none). Only a refusal for good backs off; any other outcome ends it.
func (tg *mergeTriggers) noteRefusalLocked(key string, err error) time.Duration {
	if !activities.RefusedForGood(err) {
		delete(tg.refused, key)
		return 0
	}
	if tg.refused == nil {
		tg.refused = map[string]refusal{}
	}
	r, ok := tg.refused[key]
	r.delay = min(max(2*r.delay, refusedBackoffMin), refusedBackoffMax)
	if !ok && len(tg.refused) >= maxRefusedTargets {
		delete(tg.refused, slices.MinFunc(slices.Collect(maps.Keys(tg.refused)), func(a, b string) int {
			return tg.refused[a].until.Compare(tg.refused[b].until)
		}))
	}
	r.until = tg.now().Add(r.delay)
	tg.refused[key] = r
	return r.delay
}

// urgent: the store refuses appends or its own shard is contract.UrgentPastTriggerFactor past
// the count trigger, so its merge goes ahead of routine ones.
func (tg *mergeTriggers) urgent(trigger string, pending int) bool {
	return trigger == TriggerDebt ||
		trigger == TriggerCount && tg.threshold > 0 && pending >= contract.UrgentPastTriggerFactor*tg.threshold
}

// forgetUnflushed drops the count-start retries of kind k's stores not in flushed, since only
// their seals retry; the sweep still finds such a store's debt in the demand index.
func (tg *mergeTriggers) forgetUnflushed(k store.Kind, flushed []*store.Store) {
	if !tg.countEnabled() {
		return
	}
	keep := make(map[string]bool, len(flushed))
	for _, s := range flushed {
		keep[s.Target().String()] = true
	}
	prefix := string(k) + ":"
	unflushed := func(key string) bool { return strings.HasPrefix(key, prefix) && !keep[key] }
	tg.mu.Lock()
	maps.DeleteFunc(tg.retry, func(key string, _ bool) bool { return unflushed(key) })
	maps.DeleteFunc(tg.refused, func(key string, _ refusal) bool { return unflushed(key) })
	tg.mu.Unlock()
}

// stop makes fire launch nothing from now on and waits for the starts already launched. It
// sets stopped under mu rather than trusting life to have ended: a fire that passed its
// checks adds to wg under mu, so the Wait never races that Add.
func (tg *mergeTriggers) stop() {
	tg.mu.Lock()
	tg.stopped = true
	tg.mu.Unlock()
	tg.wg.Wait()
}
