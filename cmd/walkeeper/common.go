package main

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// globalOptions are the persistent flags every command shares. The worker command registers
// its own copies of these (worker.Config.RegisterFlags), which take precedence there.
type globalOptions struct {
	temporal  worker.TemporalConfig
	logFormat string
	logLevel  string
}

// register adds the global flags, spelled, named and helped as the worker's knob table says.
func (g *globalOptions) register(fs *pflag.FlagSet) {
	g.temporal = worker.DefaultTemporalConfig()
	g.temporal.RegisterFlags(fs)
	worker.StringKnobVar(fs, &g.logFormat, "log-format", worker.LogFormatConsole, "log encoding: console or json")
	worker.StringKnobVar(fs, &g.logLevel, "log-level", "", "log level: debug, info, warn, error; default info for dev, warn otherwise")
}

// temporalConfig is the Temporal connection of the global flags; an environment value that
// did not parse (WALKEEPER_TEMPORAL_TLS=maybe) is a usage error.
func (g *globalOptions) temporalConfig() (worker.TemporalConfig, error) {
	if err := g.temporal.Validate(); err != nil {
		return worker.TemporalConfig{}, cli.Usage(err)
	}
	// A TLS file that does not load is said as such, naming the file, not as an unreachable Temporal.
	if _, err := g.temporal.ClientOptions(nil); err != nil {
		return worker.TemporalConfig{}, cli.Usage(err)
	}
	return g.temporal, nil
}

// logger builds the logger of a client command; defLevel applies when --log-level is unset.
func (g *globalOptions) logger(defLevel string) (*zap.Logger, error) {
	l, err := worker.NewLogger(os.Stderr, g.logFormat, cmp.Or(g.logLevel, defLevel))
	if err != nil {
		return nil, cli.Usage(err)
	}
	return l, nil
}

// withTemporal runs f with a client of the global flags' Temporal, under a context that
// Ctrl-C cancels; the client is closed when f returns.
func (g *globalOptions) withTemporal(cmd *cobra.Command, f func(ctx context.Context, c client.Client) error) error {
	ctx, cancel := cli.SignalContext(cmd.Context())
	defer cancel()
	c, _, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(ctx, c)
}

// dial connects to the global flags' Temporal with the logger of a client command, which it
// also returns, unless the flags are a usage error: a failed dial is an *unreachableError.
func (g *globalOptions) dial(ctx context.Context) (client.Client, *zap.Logger, error) {
	tc, err := g.temporalConfig()
	if err != nil {
		return nil, nil, err
	}
	logger, err := g.logger("warn")
	if err != nil {
		return nil, nil, err
	}
	c, err := temporaladmin.Dial(ctx, tc.Config, logger)
	if err != nil {
		return nil, logger, &unreachableError{tc: tc, err: err}
	}
	return c, logger, nil
}

// writeJSON prints v as indented JSON, the output of --json.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseOptionalTarget parses the optional TARGET argument of a command: nil when absent.
func parseOptionalTarget(args []string) (*store.Target, error) {
	if len(args) == 0 {
		return nil, nil
	}
	t, err := parseTarget(args[0])
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// parseTarget parses a <kind>:<name> argument; a malformed one is a usage error.
func parseTarget(s string) (store.Target, error) {
	t, err := store.ParseTarget(s)
	if err != nil {
		// err already names the target and the expected form.
		return store.Target{}, cli.Usage(err)
	}
	return t, nil
}
