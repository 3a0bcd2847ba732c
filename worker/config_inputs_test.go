package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

// Knobs that become inputs of the workflows the worker starts are held to those inputs'
// bounds at start, naming the flag.
func TestConfigRefusesKnobsItsWorkflowsWouldRefuse(t *testing.T) {
	for flag, mut := range map[string]func(*Config){
		"merge-prepare-concurrency": func(c *Config) { c.MergePrepareConcurrency = contract.MaxPrepareConcurrency + 1 },
		"sweep-interval":            func(c *Config) { c.SweepInterval = 500 * time.Millisecond },
		"sweep-window":              func(c *Config) { c.SweepWindow = 48 * time.Hour },
		"sweep-start-spacing":       func(c *Config) { c.SweepStartSpacing = time.Millisecond },
		"sweep-merge-min-generations": func(c *Config) {
			c.SweepMergeMinGenerations = contract.MaxSweepMergeMinGenerations + 1
		},
		"merge-run-timeout":   func(c *Config) { c.MergeRunTimeout = 0 },
		"stuck-scan-interval": func(c *Config) { c.StuckScanInterval = 2 * time.Hour },
		// Temporal refuses a schedule interval under a second: the reconcile was never ensured.
		"reconcile-interval": func(c *Config) { c.ReconcileInterval = 500 * time.Millisecond },
	} {
		c := DefaultConfig()
		mut(&c)
		err := c.Validate()
		require.Error(t, err, flag)
		require.True(t, strings.Contains(err.Error(), "--"+flag+": "), "%s: %v", flag, err)
	}

	c := DefaultConfig()
	c.SweepMergeMinGenerations = 0
	require.ErrorContains(t, c.Validate(), "--sweep-merge-min-generations: must be 1 to")
	// A negative window is refused once, as negative, not also as out of range.
	c = DefaultConfig()
	c.SweepWindow = -time.Second
	err := c.Validate()
	require.ErrorContains(t, err, "--sweep-window: must not be negative")
	require.Equal(t, 1, strings.Count(err.Error(), "--sweep-window"), "%v", err)

	// Without a schedule the sweep knobs start nothing; at their bounds they are fine.
	c = DefaultConfig()
	c.SweepInterval, c.SweepStartSpacing = 0, time.Millisecond
	require.NoError(t, c.Validate())
	c = DefaultConfig()
	c.MergePrepareConcurrency, c.SweepInterval, c.SweepWindow, c.SweepStartSpacing =
		contract.MaxPrepareConcurrency, contract.MinSweepInterval, contract.MaxSweepWindow, contract.MaxSweepStartSpacing
	c.SweepMergeMinGenerations = contract.MaxSweepMergeMinGenerations
	require.NoError(t, c.Validate())
	c.MergeRunTimeout, c.StuckScanInterval = contract.MinMergeRunTimeout, MinStuckScanInterval
	require.NoError(t, c.Validate())
	c.MergeRunTimeout, c.StuckScanInterval = contract.MaxMergeRunTimeout, 0 // 0: no scan
	require.NoError(t, c.Validate())
	c.ReconcileInterval = time.Second
	require.NoError(t, c.Validate())
	c.ReconcileInterval = 0 // 0: leave the schedule alone
	require.NoError(t, c.Validate())
	// The sweep input the schedule carries takes the same bound.
	require.NoError(t, contract.MaintenanceSweepInput{MergeMinGenerations: c.SweepMergeMinGenerations}.Validate())
}
