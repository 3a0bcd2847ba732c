package contract

import (
	"cmp"
	"time"

	"github.com/walkeeper/walkeeper/target"
)

// Defaults and bounds of MaintenanceSweepInput and SweepWindowInput (docs/TEMPORAL.md,
// "Workflow inputs"); the bounds apply to the value after defaults.
const (
	DefaultSweepMergeMinGenerations = 8
	MaxSweepMergeMinGenerations     = 100_000
	// max_pending_age (negative = off): a month is as good as off; a millisecond is as
	// eager as merge_min_generations 1, which max_starts already bounds.
	DefaultSweepMaxPendingAge  = 10 * time.Minute
	MinSweepMaxPendingAge      = time.Millisecond
	MaxSweepMaxPendingAge      = 30 * 24 * time.Hour
	DefaultSweepCompactMinRuns = 32
	MaxSweepCompactMinRuns     = 100_000
	// DefaultSweepConcurrency and MaxSweepConcurrency: StartWorkflows activities of one
	// sweep in flight.
	DefaultSweepConcurrency = 4
	MaxSweepConcurrency     = 32
	// start_spacing (negative = no pacing): at most a minute between two batches, so a
	// sweep's starts cannot be spread over hours.
	DefaultSweepStartSpacing = time.Second
	MinSweepStartSpacing     = 10 * time.Millisecond
	MaxSweepStartSpacing     = time.Minute
	// DefaultReconcileConcurrency is ReconcilePage's default and MaxStoreConcurrency bounds
	// the stores one ReconcilePage reads at once.
	DefaultReconcileConcurrency = 16
	MaxStoreConcurrency         = 128
	// Interval between two rounds of a window: below a second, rounds run back to back,
	// each a few billable actions.
	MinSweepInterval = time.Second
	MaxSweepInterval = MaxSweepWindow
	MinSweepWindow   = time.Second
	MaxSweepWindow   = 24 * time.Hour
	// MinSweepEventBudget and MaxSweepEventBudget bound event_budget: below 100 a window
	// would continue as new after nearly every round; above MaxSweepEvents the last round
	// (at most MaxSweepEvents more) could pass Temporal's 10,240-event warning.
	MinSweepEventBudget = 100
	MaxSweepEventBudget = MaxSweepEvents
	// maxCarriedTextBytes bounds the words a window's carry repeats (summaries, reasons).
	maxCarriedTextBytes = 64 << 10
)

// WithDefaults is in with every zero knob set to the default MaintenanceSweepInput
// documents: the values the sweep uses and Validate bounds. Pure.
func (in MaintenanceSweepInput) WithDefaults() MaintenanceSweepInput {
	in.MaxStarts = cmp.Or(in.MaxStarts, DefaultSweepMaxStarts)
	in.StartBatch = cmp.Or(in.StartBatch, DefaultSweepStartBatch)
	in.MergeMinGenerations = cmp.Or(in.MergeMinGenerations, DefaultSweepMergeMinGenerations)
	in.MaxPendingAge = cmp.Or(in.MaxPendingAge, DefaultSweepMaxPendingAge)
	in.CompactMinRuns = cmp.Or(in.CompactMinRuns, DefaultSweepCompactMinRuns)
	in.Concurrency = cmp.Or(in.Concurrency, DefaultSweepConcurrency)
	in.StartSpacing = cmp.Or(in.StartSpacing, DefaultSweepStartSpacing)
	if in.ParallelPrepare == nil {
		in.ParallelPrepare = new(true)
	}
	return in
}

// Validate checks every field of a sweep input against its bounds, including the history
// one sweep may add (SweepHistoryBound). Pure.
func (in MaintenanceSweepInput) Validate() error {
	d := in.WithDefaults()
	err := cmp.Or(
		in.decodeErr,
		inRange("merge_min_generations", d.MergeMinGenerations, 1, MaxSweepMergeMinGenerations),
		offOrInRange("max_pending_age", d.MaxPendingAge, MinSweepMaxPendingAge, MaxSweepMaxPendingAge),
		offOrInRange("compact_min_runs", d.CompactMinRuns, 1, MaxSweepCompactMinRuns),
		inRange("max_starts", d.MaxStarts, 1, MaxSweepStarts),
		inRange("concurrency", d.Concurrency, 1, MaxSweepConcurrency),
		inRange("start_batch", d.StartBatch, 1, MaxStartBatch),
		offOrInRange("start_spacing", d.StartSpacing, MinSweepStartSpacing, MaxSweepStartSpacing),
	)
	if err != nil {
		return err
	}
	if n := SweepHistoryBound(len(target.Kinds), d.MaxStarts, d.StartBatch); n > MaxSweepEvents {
		return inputErrorf("max_starts", "%d starts in batches of %d could add %d history events, at most %d: raise start_batch or lower max_starts",
			d.MaxStarts, d.StartBatch, n, MaxSweepEvents)
	}
	return nil
}

// WithDefaults is in with its rounds' sweep input and every zero knob set to their defaults.
// Pure.
func (in SweepWindowInput) WithDefaults() SweepWindowInput {
	in.Sweep = in.Sweep.WithDefaults()
	in.Interval = cmp.Or(in.Interval, DefaultSweepInterval)
	in.Window = cmp.Or(in.Window, DefaultSweepWindow)
	in.EventBudget = cmp.Or(in.EventBudget, DefaultSweepEventBudget)
	return in
}

// Validate checks every field of a window input against its bounds: the rounds' sweep input
// (as MaintenanceSweepInput.Validate, under "sweep."), the cadence, and a carry's shape (its
// provenance is the workflow's to check). Pure.
func (in SweepWindowInput) Validate() error {
	d := in.WithDefaults()
	err := cmp.Or(
		in.decodeErr,
		within("sweep", in.Sweep.Validate()),
		inRange("interval", d.Interval, MinSweepInterval, MaxSweepInterval),
		inRange("window", d.Window, MinSweepWindow, MaxSweepWindow),
		inRange("event_budget", d.EventBudget, MinSweepEventBudget, MaxSweepEventBudget),
	)
	if err != nil || in.Carry == nil {
		return err
	}
	return within("carry", in.Carry.validate(d.Window))
}

// validate checks a window's carry: its span within the window, counters that add up, and
// at most MaxSweepRecentRounds rounds of at most MaxSweepRoundStarts starts. Pure.
func (c SweepWindowCarry) validate(window time.Duration) error {
	t := c.Totals
	err := cmp.Or(
		timeSet("origin", c.Origin),
		spanWithin("ends", c.Origin, c.Ends, window),
		inRange("runs", c.Runs, 1, MaxCarriedRuns),
		notBefore("last_recorded", c.LastRecorded, c.Origin),
		notNegative("totals.rounds", t.Rounds),
		inRange("totals.idle_rounds", t.IdleRounds, 0, t.Rounds),
		inRange("totals.failed_rounds", t.FailedRounds, 0, t.Rounds-t.IdleRounds),
		notNegative("totals.started", t.Started),
	)
	if err != nil {
		return err
	}
	return eachWithin("recent", "rounds", c.Recent, MaxSweepRecentRounds, func(r SweepRound) error {
		return r.validate(t.Rounds)
	})
}

// validate checks one carried round of a window that has run rounds rounds. Pure.
func (r SweepRound) validate(rounds int) error {
	err := cmp.Or(
		inRange("round", r.Round, 1, rounds),
		oneOf("trigger", r.Trigger, SweepRoundInterval, SweepRoundNow),
		lengthWithin("summary", r.Summary, maxCarriedTextBytes),
		notNegative("started", r.Started),
		lengthWithin("error", r.Error, maxCarriedTextBytes),
	)
	if err != nil {
		return err
	}
	return eachWithin("starts", "starts", r.Starts, MaxSweepRoundStarts, func(s SweepStart) error {
		return cmp.Or(
			lengthWithin("target", s.Target, maxCarriedTextBytes),
			lengthWithin("workflow", s.Workflow, maxCarriedTextBytes),
			lengthWithin("trigger", s.Trigger, maxCarriedTextBytes),
			lengthWithin("reason", s.Reason, maxCarriedTextBytes),
			lengthWithin("workflow_id", s.WorkflowID, maxCarriedTextBytes),
			lengthWithin("run_id", s.RunID, maxCarriedTextBytes),
		)
	})
}

// timeSet checks that a carried moment is set.
func timeSet(field string, t time.Time) error {
	if t.IsZero() {
		return inputErrorf(field, "required")
	}
	return nil
}

// spanWithin checks from <= to <= from + span.
func spanWithin(field string, from, to time.Time, span time.Duration) error {
	if to.Before(from) || to.Sub(from) > span {
		return inputErrorf(field, "%s is not within %s of the origin %s", to.Format(time.RFC3339Nano), span, from.Format(time.RFC3339Nano))
	}
	return nil
}

// notBefore checks that an optional moment (zero = unset) is not before from.
func notBefore(field string, t, from time.Time) error {
	if !t.IsZero() && t.Before(from) {
		return inputErrorf(field, "%s is before the origin %s", t.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	return nil
}
