package devserver

import (
	"slices"
	"testing"
)

func TestTunedDynamicConfig(t *testing.T) {
	got := dynamicConfig(Options{})
	if !slices.Contains(got, "history.transferProcessorMaxPollRPS=1000") || !slices.Contains(got, "matching.useNewMatcher=true") ||
		!slices.Contains(got, "matching.enableFairness=true") || !slices.Contains(got, "matching.numTaskqueueReadPartitions=1") ||
		!slices.Contains(got, "matching.numTaskqueueWritePartitions=1") {
		t.Errorf("default tuning missing: %v", got)
	}
	got = dynamicConfig(Options{DynamicConfig: []string{"history.transferProcessorMaxPollRPS=50", "a.b=1"}})
	if want := []string{"matching.useNewMatcher=true", "matching.enableFairness=true", "matching.numTaskqueueReadPartitions=1",
		"matching.numTaskqueueWritePartitions=1", "history.transferProcessorMaxPollRPS=50", "a.b=1"}; !slices.Equal(got, want) {
		t.Errorf("override: %v, want %v", got, want)
	}
	if got := dynamicConfig(Options{ServerDefaults: true}); len(got) != 0 {
		t.Errorf("server defaults: %v, want none", got)
	}
}
