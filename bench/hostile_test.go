package bench

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/walkeeper/walkeeper/worker"
)

// The hostile budget sum is every budget the worker is sized by, request bodies included, at
// the values a worker child reports; a knob a build lacks adds nothing.
func TestHostileBudgetSumCountsEveryBudget(t *testing.T) {
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Set("body-budget-bytes", "96MiB"); err != nil {
		t.Fatal(err)
	}
	knobs := reportedKnobs(fs)
	want := cfg.CacheBytes + cfg.ReadBudgetBytes + cfg.MergeBudgetBytes + cfg.MemtableBytes + 96<<20
	if got := knobs.budgetSum(); got != want {
		t.Errorf("budget sum of %s = %d, want %d", knobs.describe(), got, want)
	}
	delete(knobs, "body-budget-bytes")
	if got := knobs.budgetSum(); got != want-96<<20 {
		t.Errorf("budget sum without a body budget = %d, want %d", got, want-96<<20)
	}
}
