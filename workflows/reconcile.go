package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// ReconcileDemand walks the whole registry, kind by kind and page by page, and makes the
// demand index agree with every store's manifests (ReconcilePage): the slow safety net under
// the demand-driven sweep (docs/DESIGN.md §12).
//
// INVARIANT: the history is bounded at any fleet size: every PagesPerRun pages the run
// continues as new carrying only the cursor, the totals and a capped problem list.
func ReconcileDemand(ctx workflow.Context, in contract.ReconcileDemandInput) (contract.ReconcileDemandResult, error) {
	if err := checkInput(ctx, in, in.CarriedField()); err != nil {
		return contract.ReconcileDemandResult{}, err
	}
	in = in.WithDefaults()
	if in.StartedAt.IsZero() {
		in.StartedAt = workflow.Now(ctx).UTC()
	}
	actx := workflow.WithActivityOptions(ctx, reconcilePageOptions())
	logger := workflow.GetLogger(ctx)
	for pages := 0; in.Cursor.KindIndex < len(target.Kinds); pages++ {
		if pages == in.PagesPerRun {
			in.Runs++
			logger.Info("Reconcile continues as new.", "kind", target.Kinds[in.Cursor.KindIndex], "after", in.Cursor.After,
				"stores", in.Totals.Stores, "runs", in.Runs)
			return contract.ReconcileDemandResult{}, workflow.NewContinueAsNewError(ctx, contract.ReconcileDemandWorkflow, in)
		}
		kind := target.Kinds[in.Cursor.KindIndex]
		var page contract.ReconcilePageResult
		err := workflow.ExecuteActivity(actx, contract.ReconcilePageActivity, contract.ReconcilePageParams{
			Kind: string(kind), After: in.Cursor.After, Limit: in.PageSize, Concurrency: in.Concurrency,
		}).Get(ctx, &page)
		if err != nil {
			res := contract.ReconcileDemandResult{Totals: in.Totals, Problems: in.Problems, Runs: in.Runs + 1}
			return res, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("reconcile of %s after %q failed: %s", kind, in.Cursor.After, errorText(err)),
				contract.ErrTypeReconcileFailed, err, res)
		}
		in.Totals.Add(page.Counts)
		keep := max(0, contract.MaxReconcileUnreadable-len(in.Problems))
		for _, p := range page.Problems[:min(keep, len(page.Problems))] {
			// The carry repeats it in every later run: an activity's error is cut to a bound.
			p.Error = contract.FailureText(p.Error)
			in.Problems = append(in.Problems, p)
		}
		if page.Next == "" {
			in.Cursor = contract.ReconcileCursor{KindIndex: in.Cursor.KindIndex + 1}
		} else {
			in.Cursor.After = page.Next
		}
	}
	res := contract.ReconcileDemandResult{Totals: in.Totals, Problems: in.Problems, Runs: in.Runs + 1}
	logger.Info("Reconcile finished.", "stores", res.Totals.Stores, "missing", res.Totals.Missing,
		"orphans", res.Totals.Orphans, "covered", res.Totals.Covered, "unreadable", res.Totals.Unreadable,
		"runs", res.Runs, "took", workflow.Now(ctx).Sub(in.StartedAt))
	recordMaintenance(ctx, contract.ReconcileDemandName)
	return res, nil
}
