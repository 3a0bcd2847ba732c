package bench

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/walkeeper/walkeeper/worker"
)

// The hostile budget sum is every budget the worker is sized by, request bodies and list pages
// included, at the values a worker child reports; a knob a build lacks adds nothing.
func TestHostileBudgetSumCountsEveryBudget(t *testing.T) {
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	for knob, v := range map[string]string{"body-budget-bytes": "96MiB", "page-budget-bytes": "48MiB"} {
		if err := fs.Set(knob, v); err != nil {
			t.Fatal(err)
		}
	}
	knobs := reportedKnobs(fs)
	want := cfg.CacheBytes + cfg.ReadBudgetBytes + cfg.MergeBudgetBytes + cfg.MemtableBytes + 96<<20 + 48<<20
	if got := knobs.budgetSum(); got != want {
		t.Errorf("budget sum of %s = %d, want %d", knobs.describe(), got, want)
	}
	delete(knobs, "body-budget-bytes")
	delete(knobs, "page-budget-bytes")
	if got := knobs.budgetSum(); got != want-96<<20-48<<20 {
		t.Errorf("budget sum without body and page budgets = %d, want %d", got, want-96<<20-48<<20)
	}
}
