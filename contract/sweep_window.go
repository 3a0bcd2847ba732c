package contract

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

// The windowed sweep (docs/DESIGN.md §12, "Sweep windows"): the Schedule walkeeper-sweep
// starts one SweepWindow per window, which runs a sweep round every interval and continues as
// new before its history grows long.

// Names of the windowed sweep.
const (
	// SweepNowSignal asks a running window for a round now (`walkeeper schedule trigger`);
	// the signals that arrived before a round starts are served by that one round.
	SweepNowSignal = "walkeeper-sweep-now"
	// WalSweepStartsName (a Double: SQL visibility's 3 Int slots are taken) is set once, by
	// the window's first round that starts something, to that round's starts; a continued run
	// inherits it and MemoSweepRounds keeps the running count.
	WalSweepStartsName = "WalSweepStarts"
	// MemoSweepRounds is the memo key of a window run's rounds that started something
	// (SweepRoundsMemo), set after each of them.
	MemoSweepRounds = "sweep_rounds"
)

// WalSweepStarts is the typed key of WalSweepStartsName.
var WalSweepStarts = temporal.NewSearchAttributeKeyFloat64(WalSweepStartsName)

// Defaults and bounds of SweepWindowInput.
const (
	DefaultSweepWindow   = time.Hour
	DefaultSweepInterval = time.Minute
	// DefaultSweepEventBudget: a run continues as new at this many events (or when Temporal
	// suggests it), far below Temporal's 10,240-event warning even after a last round.
	DefaultSweepEventBudget = 4000
	// MaxSweepRecentRounds bounds the rounds a window keeps and reports (the last ones that
	// started something or failed).
	MaxSweepRecentRounds = 10
	// MaxSweepRoundStarts bounds the starts one round record lists by name (Started counts
	// them all).
	MaxSweepRoundStarts = 16
)

// Round triggers (SweepRound.Trigger).
const (
	SweepRoundInterval = "interval"
	SweepRoundNow      = "sweep-now"
)

// SweepWindowInput is the input of SweepWindow (the Schedule walkeeper-sweep passes it).
// Zero fields take their defaults; Validate bounds every field.
type SweepWindowInput struct {
	// Sweep is every round's sweep input (thresholds, batching, discovery).
	Sweep MaintenanceSweepInput `json:"sweep"`
	// Interval is the time between the starts of two rounds (default 1m); a late round
	// starts the next at the next multiple, as overlap SKIP would.
	Interval time.Duration `json:"interval,omitempty"`
	// Window is how long the window runs rounds (default 1h): its first round starts at
	// once, its last one less than Interval before the window ends.
	Window time.Duration `json:"window,omitempty"`
	// EventBudget: continue as new once the run's history has this many events (default
	// DefaultSweepEventBudget) or Temporal suggests it.
	EventBudget int `json:"event_budget,omitempty"`
	// Carry is the state of the window across its continue-as-new runs (nil in the first;
	// a start that sets it fails).
	Carry     *SweepWindowCarry `json:"carry,omitempty"`
	decodeErr error
}

// SweepWindowCarry is what a window's run hands to the next one. Bounded: counters and at
// most MaxSweepRecentRounds rounds.
type SweepWindowCarry struct {
	// Origin is the first round's start: rounds start at Origin + k × Interval.
	Origin time.Time `json:"origin"`
	// Ends is Origin + Window.
	Ends time.Time `json:"ends"`
	// Runs counts the runs before this one.
	Runs int `json:"runs"`
	// SweepNow: a sweep-now signal reached the previous run after its last round; this run
	// starts with a round.
	SweepNow bool `json:"sweep_now,omitempty"`
	// LastRecorded is when a round last recorded the sweep's success (RecordMaintenance).
	LastRecorded time.Time         `json:"last_recorded,omitzero"`
	Totals       SweepWindowTotals `json:"totals"`
	Recent       []SweepRound      `json:"recent,omitempty"`
}

// SweepWindowTotals counts a window's rounds and starts over all its runs.
type SweepWindowTotals struct {
	Rounds       int `json:"rounds"`
	IdleRounds   int `json:"idle_rounds"`
	FailedRounds int `json:"failed_rounds,omitempty"`
	Started      int `json:"started"`
}

// SweepRound is one round that started something or failed, as the window reports it.
type SweepRound struct {
	Round   int       `json:"round"`
	At      time.Time `json:"at"`
	Trigger string    `json:"trigger"`
	// Summary says the round in words: "round 12: started 3 (2 sweep-count, 1 sweep-age);
	// skipped 41: 38 below thresholds, 3 left for the next round".
	Summary string `json:"summary"`
	Started int    `json:"started"`
	// Starts lists the first MaxSweepRoundStarts starts.
	Starts []SweepStart `json:"starts,omitempty"`
	// Error is the round's failure (a kind's listing failed after its retries).
	Error string `json:"error,omitempty"`
}

// SweepWindowResult reports a finished window.
type SweepWindowResult struct {
	Totals SweepWindowTotals `json:"totals"`
	Runs   int               `json:"runs"`
	Recent []SweepRound      `json:"recent"`
}

// SweepRoundsMemo is the memo value MemoSweepRounds: the run's starting rounds, newest last.
type SweepRoundsMemo struct {
	Started int      `json:"started"`
	Rounds  []string `json:"rounds"`
}
