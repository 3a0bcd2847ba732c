package worker

import (
	"github.com/walkeeper/walkeeper/contract"
)

// validateWorkflowInputs checks the knobs that become inputs of workflows the worker starts
// itself (the count trigger's MergeWal, the SweepWindow of the schedule walkeeper-sweep)
// against the bounds those inputs are held to (contract's Validate), so a misconfigured
// worker fails at start instead of starting runs that fail at once.
func (c *Config) validateWorkflowInputs(bad func(flag, format string, args ...any)) {
	if c.MergePrepareConcurrency > contract.MaxPrepareConcurrency {
		bad("merge-prepare-concurrency", "must be 0 to %d, got %d", contract.MaxPrepareConcurrency, c.MergePrepareConcurrency)
	}
	if err := contract.CheckMergeRunTimeout(c.MergeRunTimeout); err != nil {
		bad("merge-run-timeout", "%v", err)
	}
	if s := c.StuckScanInterval; s != 0 && (s < MinStuckScanInterval || s > MaxStuckScanInterval) {
		bad("stuck-scan-interval", "must be 0 (off) or %s to %s, got %s", MinStuckScanInterval, MaxStuckScanInterval, s)
	}
	if c.SweepInterval <= 0 {
		return // no schedule is ensured
	}
	if c.SweepInterval < contract.MinSweepInterval || c.SweepInterval > contract.MaxSweepInterval {
		bad("sweep-interval", "must be 0 (leave the schedule alone) or %s to %s, got %s",
			contract.MinSweepInterval, contract.MaxSweepInterval, c.SweepInterval)
	}
	if c.SweepWindow != 0 && (c.SweepWindow < contract.MinSweepWindow || c.SweepWindow > contract.MaxSweepWindow) {
		bad("sweep-window", "must be %s to %s, got %s", contract.MinSweepWindow, contract.MaxSweepWindow, c.SweepWindow)
	}
	if s := c.SweepStartSpacing; s > 0 && (s < contract.MinSweepStartSpacing || s > contract.MaxSweepStartSpacing) {
		bad("sweep-start-spacing", "must be 0 (no pacing) or %s to %s, got %s",
			contract.MinSweepStartSpacing, contract.MaxSweepStartSpacing, s)
	}
}
