package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// globalOptions are the persistent flags every command shares. The worker command registers
// its own copies of these (worker.Config.RegisterFlags), which take precedence there.
type globalOptions struct {
	temporal  worker.TemporalConfig
	logFormat string
	logLevel  string
}

func (g *globalOptions) register(fs *pflag.FlagSet) {
	g.temporal = worker.TemporalConfigFromEnv()
	g.temporal.RegisterFlags(fs)
	g.logFormat = os.Getenv("WALKEEPER_LOG_FORMAT")
	if g.logFormat == "" {
		g.logFormat = worker.LogFormatConsole
	}
	g.logLevel = os.Getenv("WALKEEPER_LOG_LEVEL")
	fs.StringVar(&g.logFormat, "log-format", g.logFormat, "log encoding: console or json (env WALKEEPER_LOG_FORMAT)")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "log level: debug, info, warn, error; default info for dev, warn otherwise (env WALKEEPER_LOG_LEVEL)")
}

// logger builds the logger of a client command; defLevel applies when --log-level is unset.
func (g *globalOptions) logger(defLevel string) (*zap.Logger, error) {
	lvl := g.logLevel
	if lvl == "" {
		lvl = defLevel
	}
	l, err := worker.NewLogger(g.logFormat, lvl)
	if err != nil {
		return nil, usageError{err}
	}
	return l, nil
}

// dial connects to Temporal with the global flags.
func (g *globalOptions) dial(ctx context.Context) (client.Client, *zap.Logger, error) {
	logger, err := g.logger("warn")
	if err != nil {
		return nil, nil, err
	}
	c, err := worker.Dial(ctx, g.temporal, logger)
	if err != nil {
		return nil, nil, temporalUnreachable(g.temporal, err)
	}
	return c, logger, nil
}

// parseTarget parses a <kind>:<name> argument; a malformed one is a usage error.
func parseTarget(s string) (store.Target, error) {
	t, err := store.ParseTarget(s)
	if err != nil {
		// err already names the target and the expected form.
		return store.Target{}, usageError{err}
	}
	return t, nil
}

// signalContext is ctx cancelled on SIGINT or SIGTERM.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
