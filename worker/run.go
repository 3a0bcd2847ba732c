package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// shutdownSealSlack is the time Run's Stop gets beyond ShutdownTimeout: Stop bounds the
// draining by ShutdownTimeout, and the store's final seal needs a little after it.
const shutdownSealSlack = 5 * time.Second

// Run is a worker process's life on a dialled client: New, Start, started (nil = nothing),
// then wait for ctx or for a Temporal worker to stop for good (its error is returned), and
// Stop within ShutdownTimeout (+5 s for the final seal). The fleet-worker benchmark's child
// runs it too, so it measures the process an operator runs.
func Run(ctx context.Context, cfg Config, logger *zap.Logger, c client.Client, started func(*Worker)) error {
	w, err := New(cfg, logger, c)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	logger.Info("worker started", zap.String("instance", cfg.Instance), zap.String("shard", w.DB().Shard()),
		zap.String("http", w.HTTPAddr()), zap.String("temporal", cfg.Temporal.HostPort), zap.String("namespace", cfg.Temporal.Namespace))
	if started != nil {
		started(w)
	}
	select {
	case <-ctx.Done():
	case <-w.Failed():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout+shutdownSealSlack)
	defer cancel()
	stopErr := w.Stop(sctx)
	if err := w.FailedErr(); err != nil {
		return errors.Join(err, stopErr)
	}
	if stopErr != nil {
		return fmt.Errorf("stop worker: %w", stopErr)
	}
	return nil
}
