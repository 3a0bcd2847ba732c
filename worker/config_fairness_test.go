package worker

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// --fairness-weights (and WALKEEPER_FAIRNESS_WEIGHTS) reach the config; a value
// contract.ParseFairnessWeights refuses is refused by the flag, and from the environment by
// Validate naming the variable.
func TestConfigFairnessWeights(t *testing.T) {
	c, _ := parsedConfig(t, "--fairness-weights", "rollout=2")
	if c.FairnessWeights.Weight(store.KindRollout) != 2 || c.FairnessWeights.Weight(store.KindGeneric) != contract.DefaultFairnessWeight {
		t.Errorf("weights %v", c.FairnessWeights)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{"rollout=NaN", "rollout=+Inf", "rollout=-1", "rollout=1e308", "rollout=1,rollout=2", "nokind=1", "rollout=" + strings.Repeat("9", 1<<16)} {
		c := DefaultConfig()
		fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		c.RegisterFlags(fs)
		err := fs.Parse([]string{"--fairness-weights", bad})
		if err == nil || !strings.Contains(err.Error(), "fairness-weights") {
			t.Errorf("--fairness-weights %.20q: %v, want an error naming the flag", bad, err)
		}
	}

	t.Setenv("WALKEEPER_FAIRNESS_WEIGHTS", "rollout=0")
	c, _ = parsedConfig(t)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "WALKEEPER_FAIRNESS_WEIGHTS") {
		t.Errorf("bad WALKEEPER_FAIRNESS_WEIGHTS: %v, want an error naming it", err)
	}
}
