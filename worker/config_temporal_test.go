package worker_test

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/worker"
)

func TestTemporalFlagsReadTheEnvironment(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL", "temporal:7233")
	t.Setenv("WALKEEPER_NAMESPACE", "prod")
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "true")
	t.Setenv("WALKEEPER_TEMPORAL_TLS_SERVER_NAME", "temporal.internal")
	c := worker.DefaultTemporalConfig()
	c.RegisterFlags(pflag.NewFlagSet("t", pflag.ContinueOnError))
	require.NoError(t, c.Validate())
	assert.Equal(t, "temporal:7233", c.HostPort)
	assert.Equal(t, "prod", c.Namespace)
	assert.True(t, c.TLS)
	assert.Equal(t, "temporal.internal", c.TLSServerName)
}

// A Temporal boolean in the environment parses like every other knob: a bad value is an
// error naming the variable, never a silent false.
func TestTemporalConfigBadEnvIsAnError(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "maybe")
	var c worker.TemporalConfig
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(nil))
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WALKEEPER_TEMPORAL_TLS")

	// The flag given on the command line supersedes the bad environment value.
	c = worker.DefaultTemporalConfig()
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--temporal-tls"}))
	require.NoError(t, c.Validate())
	assert.True(t, c.TLS)

	// Help texts and environment names come from the knob table.
	for _, k := range worker.Knobs() {
		if f := fs.Lookup(k.Flag); f != nil {
			assert.Equal(t, k.Usage+" (env "+k.Env+")", f.Usage, k.Flag)
		}
	}
	assert.NotNil(t, fs.Lookup("temporal-api-key"))
}
