package workflows

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unicode"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// sweepRecordEvery is the least time between two RecordMaintenance calls of a window, inside
// WalkeeperSweepStale's 5 minutes without adding an activity to every idle round.
const sweepRecordEvery = time.Minute

// SweepRoundLostTaskDelay is how much longer a window round takes when one of its activity
// tasks is lost in delivery (docs/OPERATIONS.md §9): the heartbeat timeout and the first retry
// interval.
func SweepRoundLostTaskDelay() time.Duration {
	longest := max(demandScanOptions().HeartbeatTimeout, startWorkflowsOptions().HeartbeatTimeout, recordMaintenanceOptions().StartToCloseTimeout)
	return longest + retryPolicy(1, 0).InitialInterval
}

// SweepWindow runs a sweep round every in.Interval for in.Window (docs/DESIGN.md §12, "Sweep
// windows"), inline, so the Schedule walkeeper-sweep starts one workflow per window and an
// idle round leaves only its listings and timer. The signal walkeeper-sweep-now runs a round
// at once.
//
// INVARIANT: the history stays bounded: the run continues as new after in.EventBudget events
// or when Temporal suggests it, carrying only counters and MaxSweepRecentRounds rounds.
func SweepWindow(ctx workflow.Context, in contract.SweepWindowInput) (contract.SweepWindowResult, error) {
	carried := ""
	if in.Carry != nil {
		carried = "carry"
	}
	if err := checkInput(ctx, in, carried); err != nil {
		return contract.SweepWindowResult{}, err
	}
	in = in.WithDefaults()
	var err error
	w := &sweepWindow{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if named := reasonWindowID(w.id); named != w.id && gated(ctx, sweepReasonBoundedChange) {
		w.id = named
	}
	if in.Carry != nil {
		w.carry = *in.Carry
	} else {
		now := workflow.Now(ctx)
		w.carry = contract.SweepWindowCarry{Origin: now, Ends: now.Add(in.Window)}
	}
	now := workflow.GetSignalChannel(ctx, contract.SweepNowSignal)
	logger := workflow.GetLogger(ctx)

	// A window's first round is its first slot, at once (due); a continued run waits for the
	// next slot (the previous run served the current one) unless a sweep-now was pending.
	trigger, due := contract.SweepRoundInterval, in.Carry == nil || w.carry.SweepNow
	if w.carry.SweepNow {
		trigger, w.carry.SweepNow = contract.SweepRoundNow, false
	}
	for {
		asked := false
		if due {
			if err := w.round(ctx, trigger); err != nil {
				return w.result(), err // canceled
			}
			asked = drainSweepNow(now)
		}
		next := w.nextSlot(workflow.Now(ctx))
		if !asked && !next.Before(w.carry.Ends) {
			return w.finish(ctx)
		}
		info := workflow.GetInfo(ctx)
		if due && (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= in.EventBudget) {
			w.carry.Runs++
			w.carry.SweepNow = asked
			in.Carry = &w.carry
			logger.Info("Sweep window continues as new.", "rounds", w.carry.Totals.Rounds, "started", w.carry.Totals.Started,
				"runs", w.carry.Runs, "history_length", info.GetCurrentHistoryLength())
			return contract.SweepWindowResult{}, workflow.NewContinueAsNewError(ctx, contract.SweepWindowWorkflow, in)
		}
		due = true
		if asked {
			trigger = contract.SweepRoundNow
			continue
		}
		if trigger, err = w.wait(ctx, now, next); err != nil {
			return w.result(), err
		}
	}
}

// sweepReasonBoundedChange is the GetVersion change ID of start reasons that name a long or
// control-character window ID by reasonWindowID, whose reasons had failed the trigger_reason
// check; only runs whose ID needs it record the marker, in their first workflow task.
const sweepReasonBoundedChange = "sweep-reason-bounded"

// sweepRoundErrorsCutChange is the GetVersion change ID of a failed round's error cut to
// contract.MaxFailureTextBytes of JSON, escapes included, where the bytes of text that
// escaping grows sixfold made ten failed rounds' carry and result over 500 KiB; only a run
// with a failed round records the marker, at its first.
const sweepRoundErrorsCutChange = "sweep-round-errors-cut"

// roundFailureText is a failed round's error as the round, its summary and so the carry,
// result and memo record it. Pure but for the gate.
func roundFailureText(ctx workflow.Context, text string) string {
	if gated(ctx, sweepRoundErrorsCutChange) {
		return contract.FailureTextJSON(text)
	}
	return contract.FailureText(text)
}

// maxReasonWindowBytes bounds the window ID a start's reason repeats: a workflow ID may be
// 1,000 bytes, the whole reason at most contract.MaxTriggerReasonBytes.
const maxReasonWindowBytes = 256

// reasonWindowID is id as the reasons of a window's starts name it: control characters
// replaced, cut to maxReasonWindowBytes. Pure.
func reasonWindowID(id string) string {
	plain := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, id)
	return contract.Clip(plain, maxReasonWindowBytes)
}

// sweepWindow is one run of a window.
type sweepWindow struct {
	in contract.SweepWindowInput
	// id is the window's workflow ID as its starts' reasons name it (reasonWindowID).
	id    string
	carry contract.SweepWindowCarry
	// last says the newest round in words, for the current details.
	last string
}

// nextSlot is the first round start (Origin + k × Interval) after now. Pure.
func (w *sweepWindow) nextSlot(now time.Time) time.Time {
	k := now.Sub(w.carry.Origin)/w.in.Interval + 1
	return w.carry.Origin.Add(k * w.in.Interval)
}

// drainSweepNow empties the sweep-now channel and says whether it held a signal.
func drainSweepNow(ch workflow.ReceiveChannel) bool {
	asked := false
	for ch.ReceiveAsync(nil) {
		asked = true
	}
	return asked
}

// wait blocks until next or a sweep-now signal, and says which came. A canceled window
// returns the cancellation.
func (w *sweepWindow) wait(ctx workflow.Context, now workflow.ReceiveChannel, next time.Time) (string, error) {
	w.details(ctx, next)
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimerWithOptions(timerCtx, next.Sub(workflow.Now(ctx)), workflow.TimerOptions{Summary: "next sweep round"})
	trigger := contract.SweepRoundInterval
	sel := workflow.NewSelector(ctx)
	// The timer fails only when ctx is cancelled, which the check below returns.
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.AddReceive(now, func(ch workflow.ReceiveChannel, _ bool) {
		drainSweepNow(ch)
		trigger = contract.SweepRoundNow
	})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	sel.Select(ctx)
	if err := ctx.Err(); err != nil {
		return "", temporal.NewCanceledError("sweep window canceled")
	}
	return trigger, nil
}

// round runs one sweep round and reports it; only a canceled window returns an error, while a
// failed listing is counted, logged and tried again next round.
func (w *sweepWindow) round(ctx workflow.Context, trigger string) error {
	w.carry.Totals.Rounds++
	n := w.carry.Totals.Rounds
	at := workflow.Now(ctx)
	label := roundLabel{window: w.id, round: n}
	res, err := demandSweep(ctx, w.in.Sweep, label)
	if ctx.Err() != nil {
		return temporal.NewCanceledError("sweep window canceled")
	}
	failure := "" // demandSweep fails exactly when a kind's scan failed (res.ScanErrors)
	if err != nil {
		// The carry repeats it (in the round and its summary): a listing's error is cut to a bound.
		failure = roundFailureText(ctx, errorText(err))
	}
	summary := roundSummary(n, trigger, res, failure)
	w.last = fmt.Sprintf("%s at %s", summary, at.UTC().Format(time.TimeOnly))
	logger := workflow.GetLogger(ctx)
	if failure == "" && at.Sub(w.carry.LastRecorded) >= sweepRecordEvery {
		recordMaintenance(ctx, contract.MaintenanceSweepName)
		w.carry.LastRecorded = at
	}
	started := res.StartedCount()
	if failure == "" && started == 0 {
		w.carry.Totals.IdleRounds++
		return nil
	}
	r := contract.SweepRound{Round: n, At: at.UTC(), Trigger: trigger, Summary: summary, Started: started, Error: failure}
	r.Starts = res.Started[:min(len(res.Started), contract.MaxSweepRoundStarts)]
	w.carry.Recent = append(w.carry.Recent, r)
	if extra := len(w.carry.Recent) - contract.MaxSweepRecentRounds; extra > 0 {
		w.carry.Recent = append([]contract.SweepRound(nil), w.carry.Recent[extra:]...)
	}
	if failure != "" {
		w.carry.Totals.FailedRounds++
		logger.Warn("Sweep round failed.", "round", n, "error", failure, "started", started)
	}
	if started == 0 {
		return nil
	}
	first := w.carry.Totals.Started == 0
	w.carry.Totals.Started += started
	logger.Info("Sweep round started workflows.", "round", n, "summary", summary)
	w.mark(ctx, first)
	return nil
}

// mark tells visibility that the window started something: the memo after every starting
// round (no billable action), and WalSweepStarts once, with its first start.
func (w *sweepWindow) mark(ctx workflow.Context, first bool) {
	memo := contract.SweepRoundsMemo{Started: w.carry.Totals.Started}
	for _, r := range w.carry.Recent {
		if r.Started > 0 {
			memo.Rounds = append(memo.Rounds, r.At.Format(time.TimeOnly)+" "+r.Summary)
		}
	}
	if first {
		if err := workflow.UpsertTypedSearchAttributes(ctx, contract.WalSweepStarts.ValueSet(float64(w.carry.Totals.Started))); err != nil {
			workflow.GetLogger(ctx).Warn("Cannot set WalSweepStarts.", "error", err)
		}
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{contract.MemoSweepRounds: memo}); err != nil {
		workflow.GetLogger(ctx).Warn("Cannot set the sweep window's memo.", "error", err)
	}
}

// details shows the window in Temporal Web's current details (no history event).
func (w *sweepWindow) details(ctx workflow.Context, next time.Time) {
	t := w.carry.Totals
	var b strings.Builder
	fmt.Fprintf(&b, "Sweep window until %s UTC, a round every %s (run %d).\n\n", w.carry.Ends.UTC().Format(time.TimeOnly), w.in.Interval, w.carry.Runs+1)
	fmt.Fprintf(&b, "%d rounds: %d idle, %d failed; %d workflows started.\n\n", t.Rounds, t.IdleRounds, t.FailedRounds, t.Started)
	if w.last != "" {
		fmt.Fprintf(&b, "Last: %s.\n\n", w.last)
	}
	if !next.IsZero() {
		fmt.Fprintf(&b, "Next round at %s UTC.\n", next.UTC().Format(time.TimeOnly))
	}
	if len(w.carry.Recent) > 0 {
		b.WriteString("\nLast rounds that started something or failed:\n")
		for i := len(w.carry.Recent) - 1; i >= 0; i-- {
			r := w.carry.Recent[i]
			fmt.Fprintf(&b, "- %s %s", r.At.Format(time.TimeOnly), r.Summary)
			if len(r.Starts) > 0 {
				names := make([]string, len(r.Starts))
				for j, s := range r.Starts {
					names[j] = s.Workflow + " " + s.Target
				}
				fmt.Fprintf(&b, " — %s", strings.Join(names, ", "))
				if r.Started > len(r.Starts) {
					fmt.Fprintf(&b, ", and %d more", r.Started-len(r.Starts))
				}
			}
			b.WriteString("\n")
		}
	}
	setDetails(ctx, b.String())
}

// finish ends the window: Completed, or failed with SweepListFailed when every round of it
// failed (the window did nothing an operator can rely on).
func (w *sweepWindow) finish(ctx workflow.Context) (contract.SweepWindowResult, error) {
	w.details(ctx, time.Time{})
	res := w.result()
	t := w.carry.Totals
	workflow.GetLogger(ctx).Info("Sweep window finished.", "rounds", t.Rounds, "idle", t.IdleRounds,
		"failed", t.FailedRounds, "started", t.Started, "runs", res.Runs)
	if t.Rounds > 0 && t.FailedRounds == t.Rounds {
		last := ""
		if n := len(w.carry.Recent); n > 0 {
			last = w.carry.Recent[n-1].Error
		}
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("every one of the window's %d sweep rounds failed, the last: %s", t.Rounds, last),
			contract.ErrTypeSweepListFailed, nil, res)
	}
	return res, nil
}

func (w *sweepWindow) result() contract.SweepWindowResult {
	recent := w.carry.Recent
	if recent == nil {
		recent = []contract.SweepRound{}
	}
	return contract.SweepWindowResult{Totals: w.carry.Totals, Runs: w.carry.Runs + 1, Recent: recent}
}

// roundLabel names a window's round in its activity summaries and in the reasons of the
// workflows it starts. The zero value (a MaintenanceSweep) leaves both as they were.
type roundLabel struct {
	window string
	round  int
}

// options is o with the round and the kind in its summary.
func (l roundLabel) options(o workflow.ActivityOptions, kind string) workflow.ActivityOptions {
	if l.round > 0 {
		o.Summary = fmt.Sprintf("round %d %s: %s", l.round, kind, o.Summary)
	}
	return o
}

// request is req with the window and round appended to its reason, so the started run's
// summary and memo link back to the sweep that started it.
func (l roundLabel) request(req contract.StartRequest) contract.StartRequest {
	if l.round > 0 {
		req.Reason = fmt.Sprintf("%s; sweep window %s round %d", req.Reason, l.window, l.round)
	}
	return req
}

// batchSummary is the summary of one StartWorkflows batch of a round: the first batch of a
// kind says the kind's whole plan ("round 12 generic: start 3 (2 sweep-count, 1 sweep-age);
// skipped 41: 38 below thresholds, 3 left for the next round"), the others their part.
func (l roundLabel) batchSummary(kind string, plan sweepPlan, omitted, i, batches int, batch []plannedStart) string {
	kind = cmp.Or(kind, "every kind")
	if i > 0 {
		return fmt.Sprintf("round %d %s: start batch %d/%d (%d)", l.round, kind, i+1, batches, len(batch))
	}
	triggers := countWords(plan.starts, func(s plannedStart) string { return s.req.Trigger })
	s := fmt.Sprintf("round %d %s: start %d (%s)", l.round, kind, len(plan.starts), triggers)
	if skips := skipWords(plan.below, plan.skipped, omitted); skips != "" {
		s += "; " + skips
	}
	if batches > 1 {
		s += fmt.Sprintf(" — batch 1/%d", batches)
	}
	return s
}

// roundSummary says a finished round in words. Pure.
func roundSummary(n int, trigger string, res contract.MaintenanceSweepResult, failure string) string {
	s := fmt.Sprintf("round %d", n)
	if trigger == contract.SweepRoundNow {
		s += " (sweep now)"
	}
	if res.StartedCount() == 0 {
		s += ": started nothing"
	} else {
		words := countWords(res.Started, func(st contract.SweepStart) string { return st.Trigger })
		if res.StartedOmitted > 0 { // the result lists the first starts only
			words = fmt.Sprintf("first %d: %s; %d more", len(res.Started), words, res.StartedOmitted)
		}
		s += fmt.Sprintf(": started %d (%s)", res.StartedCount(), words)
	}
	if skips := skipWords(max(0, res.StoresWithDebt-res.Qualified), res.Skipped, res.SkippedOmitted); skips != "" {
		s += "; " + skips
	}
	if failure != "" {
		s += "; FAILED: " + failure
	}
	return s
}

// countWords counts the items' equal words in first-seen order: "2 sweep-count, 1 sweep-age".
// Pure.
func countWords[T any](items []T, word func(T) string) string {
	var order []string
	counts := map[string]int{}
	for _, item := range items {
		v := cmp.Or(word(item), "unknown")
		if counts[v] == 0 {
			order = append(order, v)
		}
		counts[v]++
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[v], v)
	}
	return strings.Join(parts, ", ")
}

// skipWords says why a round or a kind skipped what it skipped: "skipped 41: 38 below
// thresholds, 3 left for the next round" ("" when nothing was skipped). Pure.
func skipWords(below int, skipped []contract.SweepSkip, omitted int) string {
	total := below + len(skipped) + omitted
	if total == 0 {
		return ""
	}
	kinds := countWords(skipped, func(sk contract.SweepSkip) string { return skipKind(sk.Reason) })
	var parts []string
	if below > 0 {
		parts = append(parts, fmt.Sprintf("%d below thresholds", below))
	}
	if kinds != "" {
		parts = append(parts, kinds)
	}
	if omitted > 0 {
		parts = append(parts, fmt.Sprintf("%d left for the next round", omitted))
	}
	return fmt.Sprintf("skipped %d: %s", total, strings.Join(parts, ", "))
}

// skipKind is the class of a SweepSkip reason, for counting. Pure.
func skipKind(reason string) string {
	switch {
	case reason == "below thresholds":
		return "below thresholds"
	case strings.Contains(reason, "max starts"):
		return "over max starts"
	case strings.HasPrefix(reason, "start "):
		return "start failed"
	}
	return "other"
}
