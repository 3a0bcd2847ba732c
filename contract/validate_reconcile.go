package contract

import (
	"cmp"
	"github.com/walkeeper/walkeeper/target"
)

// Bounds of ReconcileDemandInput besides DefaultReconcilePage, MaxReconcilePage and
// DefaultReconcilePagesPerRun (docs/TEMPORAL.md, "Workflow inputs").
const (
	// MinReconcilePage: a page is one activity, so tiny pages would make a reconcile of a
	// million stores cost a million actions.
	MinReconcilePage = 10
	// MaxReconcilePagesPerRun: a page adds about six events, so a run stays far below
	// Temporal's 10,240-event warning.
	MaxReconcilePagesPerRun = 1000
)

// WithDefaults is in with the page size and the pages per run set to their defaults when zero
// (concurrency stays 0 in the carried input: ReconcilePage defaults it). Pure.
func (in ReconcileDemandInput) WithDefaults() ReconcileDemandInput {
	in.PageSize = cmp.Or(in.PageSize, DefaultReconcilePage)
	in.PagesPerRun = cmp.Or(in.PagesPerRun, DefaultReconcilePagesPerRun)
	return in
}

// Validate checks every field of a reconcile input against its bounds, carried ones for shape
// (their provenance is the workflow's to check, CarriedField). Pure.
func (in ReconcileDemandInput) Validate() error {
	d := in.WithDefaults()
	err := cmp.Or(
		in.decodeErr,
		inRange("page_size", d.PageSize, MinReconcilePage, MaxReconcilePage),
		inRange("concurrency", cmp.Or(in.Concurrency, DefaultReconcileConcurrency), 1, MaxStoreConcurrency),
		inRange("pages_per_run", d.PagesPerRun, 1, MaxReconcilePagesPerRun),
		inRange("cursor.kind_index", in.Cursor.KindIndex, 0, len(target.Kinds)),
		cursorAfter("cursor.after", in.Cursor.After),
		notNegative("totals.stores", in.Totals.Stores),
		notNegative("totals.missing", in.Totals.Missing),
		notNegative("totals.covered", in.Totals.Covered),
		notNegative("totals.orphans", in.Totals.Orphans),
		notNegative("totals.unreadable", in.Totals.Unreadable),
		notNegative("totals.pages", in.Totals.Pages),
		inRange("runs", in.Runs, 0, MaxCarriedRuns),
	)
	if err != nil {
		return err
	}
	return eachWithin("problems", "problems", in.Problems, MaxReconcileUnreadable, func(p StoreProblem) error {
		return cmp.Or(
			lengthWithin("target", p.Target, maxCarriedTextBytes),
			lengthWithin("error", p.Error, maxCarriedErrorBytes),
			lengthWithin("error_type", p.ErrorType, maxErrorTypeBytes),
		)
	})
}

// CarriedField names the first field of in that only a continued run may hold, or "".
func (in ReconcileDemandInput) CarriedField() string {
	switch {
	case in.Cursor != (ReconcileCursor{}):
		return "cursor"
	case in.Totals != (ReconcileCounts{}):
		return "totals"
	case len(in.Problems) > 0:
		return "problems"
	case in.Runs != 0:
		return "runs"
	case !in.StartedAt.IsZero():
		return "started_at"
	}
	return ""
}

// cursorAfter checks a registry cursor: empty (the kind's start) or a store name.
func cursorAfter(field, after string) error {
	if after == "" {
		return nil
	}
	if err := target.ValidateName(after); err != nil {
		return inputErrorf(field, "not a store name: %q", Clip(after, quotedMax))
	}
	return nil
}
