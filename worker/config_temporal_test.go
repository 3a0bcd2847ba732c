package worker

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Temporal boolean in the environment parses like every other knob: a bad value is an
// error naming the variable, never a silent false. The flag given on the command line
// supersedes it, and the other Temporal variables are read as given.
func TestTemporalConfigBadEnvIsAnError(t *testing.T) {
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "maybe")
	var c TemporalConfig
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(nil))
	require.ErrorContains(t, c.Validate(), "WALKEEPER_TEMPORAL_TLS")

	t.Setenv("WALKEEPER_TEMPORAL", "temporal:7233")
	t.Setenv("WALKEEPER_NAMESPACE", "prod")
	t.Setenv("WALKEEPER_TEMPORAL_TLS_SERVER_NAME", "temporal.internal")
	c = DefaultTemporalConfig()
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--temporal-tls"}))
	require.NoError(t, c.Validate())
	assert.True(t, c.TLS)
	assert.Equal(t, "temporal:7233", c.HostPort)
	assert.Equal(t, "prod", c.Namespace)
	assert.Equal(t, "temporal.internal", c.TLSServerName)

	// Help texts and environment names come from the knob table.
	for _, k := range Knobs() {
		if f := fs.Lookup(k.Flag); f != nil {
			assert.Equal(t, k.Usage+" (env "+k.Env+")", f.Usage, k.Flag)
		}
	}
	assert.NotNil(t, fs.Lookup("temporal-api-key"))
}
