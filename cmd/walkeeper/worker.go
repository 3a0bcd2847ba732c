package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

func newWorkerCmd() *cobra.Command {
	cfg := worker.DefaultConfig()
	var dialWait time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: HTTP data plane, flush sweeper and Temporal workers",
		Long: `Run one walkeeper worker process: the HTTP data plane (docs/DESIGN.md §5), the flush sweeper and
count trigger, and Temporal workers on the shared task queue "walkeeper" and on this
instance's shard queue "walkeeper-shard-<shard>". On start it registers the search
attributes and ensures the schedules walkeeper-sweep (unless --sweep-interval is 0) and
walkeeper-reconcile (unless --reconcile-interval is 0).

Every flag is also read from WALKEEPER_<FLAG> (upper case, dashes as underscores);
precedence: flag > environment > default. SIGINT/SIGTERM stop it gracefully: the HTTP
server drains, running activities finish, memtables are sealed. It stops the same way, and
exits 1, when one of its Temporal workers stops on an error the SDK does not retry (a namespace
not served for 2 minutes): that worker would never poll again, so it is left to be restarted.`,
		Example: `  walkeeper worker --instance w1 --storage 's3://bucket?prefix=walkeeper/' --temporal temporal:7233`,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := cfg.Validate(); err != nil {
				return cli.Usage(err)
			}
			// A TLS file that does not load never will: said at once, not retried as an
			// unreachable Temporal for --temporal-wait.
			if _, err := cfg.Temporal.ClientOptions(nil); err != nil {
				return cli.Usage(err)
			}
			// Nor does a storage URL the bucket layer refuses, which the worker would only
			// open once Temporal answers. Opening it makes a file:// root, as the worker would,
			// since only trying a mkdir tells a root the file system will not make; the worker
			// then runs on this bucket rather than opening the storage again.
			b, err := objstore.OpenBucket(cmd.Context(), cfg.Storage)
			if errors.Is(err, objstore.ErrInvalidInput) {
				return cli.Usage(fmt.Errorf("--storage: %w", err))
			}
			if err != nil {
				return fmt.Errorf("--storage: %w", err)
			}
			defer func() { _ = b.Close() }() // when Run does not get it; closing twice is nothing
			logger, err := worker.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
			if err != nil {
				return cli.Usage(err)
			}
			defer func() { _ = logger.Sync() }()
			ctx, stop := cli.SignalContext(cmd.Context())
			defer stop()
			c, err := dialRetry(ctx, cfg.Temporal, logger, dialWait)
			if err != nil {
				return err
			}
			defer c.Close()
			return worker.Run(ctx, cfg, logger, c, b, nil)
		},
	}
	cfg.RegisterFlags(cmd.Flags())
	cmd.Flags().DurationVar(&dialWait, "temporal-wait", time.Minute, "keep retrying to reach Temporal this long on start")
	return cmd
}

// dialRetry dials Temporal until it answers or wait is over (Temporal may start alongside).
func dialRetry(ctx context.Context, tc worker.TemporalConfig, logger *zap.Logger, wait time.Duration) (client.Client, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := temporaladmin.Dial(ctx, tc.Config, logger)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		logger.Warn("temporal not reachable yet, retrying", zap.String("temporal", tc.HostPort), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
