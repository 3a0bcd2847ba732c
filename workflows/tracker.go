package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// tracker runs activities for one workflow run and keeps what the status query needs to say
// why the run is not making progress, from history only so replays agree: the
// ActivityStateSignals activities send while they wait, and the activities in flight, whose
// slot waits `walkeeper status` reads from the server's pending activities
// (contract.ApplyPending) rather than a timer per activity.
type tracker struct {
	originalRunID string
	// slotWait is also every activity's NotifyAfter: it asks for signals of the state changes
	// the workflow cannot see (budget wait, retry backoff).
	slotWait time.Duration
	seq      int
	inflight []*watch
	onChange func() // never nil
	// actions counts the billable actions of what the tracker ran and heard: activities
	// scheduled, listings, signals received and the retries they announce.
	actions int
	// refused counts the activity-state signals whose payload did not decode (the status's
	// refused_signals).
	refused int
}

// watch is one activity in flight.
type watch struct {
	id       string
	activity string
	shard    string
	queue    string
	state    string
	attempt  int
	lastErr  string
}

func newTracker(ctx workflow.Context, slotWait time.Duration, onChange func()) *tracker {
	t := &tracker{
		originalRunID: workflow.GetInfo(ctx).OriginalRunID,
		slotWait:      slotWait,
		onChange:      onChange,
	}
	ch := workflow.GetSignalChannel(ctx, contract.ActivityStateSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var raw converter.RawValue
			if !ch.Receive(ctx, &raw) {
				return
			}
			s, err := decodeActivityState(raw)
			if err != nil {
				t.refused++
				// A metric, not a command: replays neither change nor count it again.
				workflow.GetMetricsHandler(ctx).WithTags(map[string]string{contract.MetricTagSignal: contract.ActivityStateSignal,
					contract.MetricTagWorkflow: workflow.GetInfo(ctx).WorkflowType.Name}).Counter(contract.MetricRefusedSignals).Inc(1)
				workflow.GetLogger(ctx).Warn("Signal refused: its payload does not decode.", "signal", contract.ActivityStateSignal,
					"error", contract.Clip(err.Error(), contract.MaxFailureTextBytes), "refused", t.refused)
				continue
			}
			t.apply(s)
		}
	})
	return t
}

// decodeActivityState decodes a signal received raw, so that one that does not decode is
// counted and logged, then dropped, the run's commands unchanged.
func decodeActivityState(raw converter.RawValue) (contract.ActivityState, error) {
	var s contract.ActivityState
	if raw.Payload() == nil {
		return s, nil
	}
	err := converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &s)
	return s, err
}

// newWatch names the next activity. The ID embeds the original run ID, since activity IDs
// restart at each continue-as-new and new run while activities derive their idempotency key
// from workflow ID + activity ID; a reset keeps it, so its retries are the same attempt.
func (t *tracker) newWatch(activity, shard, queue string) *watch {
	t.seq++
	return &watch{
		id:       fmt.Sprintf("%s/%s/%d", activity, t.originalRunID, t.seq),
		activity: activity,
		shard:    shard,
		queue:    queue,
	}
}

// exec runs one activity under w and decodes its result into out.
func (t *tracker) exec(ctx workflow.Context, opts workflow.ActivityOptions, w *watch, arg, out any) error {
	opts.ActivityID = w.id
	opts.TaskQueue = w.queue
	// Its first attempt is one action; retries arrive with its signals (apply).
	return t.await(ctx, w, workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), w.activity, arg), out)
}

// execLocal runs one local activity under w, in flight for the status query like any other;
// the server never lists it as pending, so it never reads as waiting for a slot.
func (t *tracker) execLocal(ctx workflow.Context, opts workflow.LocalActivityOptions, w *watch, arg, out any) error {
	// Temporal Cloud bills the local activities of one workflow task as one action; each
	// listing runs in a task of its own (after an activity or at the start), so one each.
	return t.await(ctx, w, workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), w.activity, arg), out)
}

// await counts the activity of fut as one action and keeps w in flight until fut is ready.
func (t *tracker) await(ctx workflow.Context, w *watch, fut workflow.Future, out any) error {
	t.actions++
	t.inflight = append(t.inflight, w)
	t.onChange()
	defer func() {
		t.inflight = slices.DeleteFunc(t.inflight, func(x *watch) bool { return x == w })
		t.onChange()
	}()
	return fut.Get(ctx, out)
}

// inFlight lists the activities in flight, oldest first, for the status query.
func (t *tracker) inFlight() []contract.InFlightActivity {
	out := make([]contract.InFlightActivity, 0, len(t.inflight))
	for _, w := range t.inflight {
		out = append(out, contract.InFlightActivity{ID: w.id, Activity: w.activity, Shard: w.shard, Queue: w.queue})
	}
	return out
}

func (t *tracker) apply(s contract.ActivityState) {
	t.actions++ // the signal itself
	if s.State == contract.ActivityStateRetrying {
		t.actions++ // the attempt Temporal runs next, billed like the first
	}
	for _, w := range t.inflight {
		if w.id != s.ActivityID {
			continue
		}
		w.attempt = s.Attempt
		switch s.State {
		case contract.ActivityStateRetrying:
			// Between attempts nothing runs until Temporal dispatches the next one. Anyone with
			// namespace access can send this signal, with up to a payload's 2 MiB of text.
			w.lastErr = contract.Clip(s.Error, contract.MaxFailureTextBytes)
			fallthrough
		case contract.ActivityStateRunning, contract.ActivityStateWaitingBudget:
			w.state = s.State
		}
		t.onChange()
		return
	}
	// A late signal for an activity that already finished: nothing to show.
}

// blocked is the reason the first blocked activity of shard ("" = any shard) waits, or "".
func (t *tracker) blocked(shard string) string {
	for _, w := range t.inflight {
		if shard != "" && w.shard != shard {
			continue
		}
		if r := w.blocked(); r != "" {
			return r
		}
	}
	return ""
}

func (w *watch) blocked() string {
	switch w.state {
	case contract.ActivityStateWaitingBudget:
		return contract.BlockedBudget
	case contract.ActivityStateRetrying:
		return contract.BackoffReason(w.attempt, w.lastErr)
	}
	return ""
}

// errorType is the application error type carried by err ("" if none).
func errorType(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return appErr.Type()
	}
	return ""
}

// isScheduleToStartTimeout reports whether an activity expired in its queue without any
// worker picking it up.
func isScheduleToStartTimeout(err error) bool {
	te, ok := errors.AsType[*temporal.TimeoutError](err)
	return ok && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// errorText is the innermost useful message of an activity error: the application error's
// own message rather than the "activity error (type: ..., scheduledEventID: ...)" wrapper.
func errorText(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return appErr.Error()
	}
	if te, ok := errors.AsType[*temporal.TimeoutError](err); ok {
		return te.Error()
	}
	return err.Error()
}
