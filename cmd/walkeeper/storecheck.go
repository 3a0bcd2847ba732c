package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// storeMissingError refuses work on a store that is not registered, before anything starts in
// Temporal: no Failed run is left behind. Exit status 2 (bad input).
type storeMissingError struct {
	target store.Target
	worker string // a worker's HTTP base URL for the create hint, or ""
}

func (e *storeMissingError) Error() string {
	return contract.MissingStoreMessage(e.target, e.worker)
}

// openStorage opens the storage root with opts for one command as instance; the caller closes
// the DB. A root that does not exist is bad input, never created: only workers create one.
func openStorage(ctx context.Context, storage, instance string, logger *zap.Logger, opts store.Options) (*store.DB, error) {
	opts.Logger = logger
	opts.InstanceID = instance
	db, err := store.OpenExistingDB(ctx, storage, opts)
	if errors.Is(err, store.ErrInvalidInput) {
		return nil, fmt.Errorf("--storage: %w", err) // the error names the URL
	}
	if err != nil {
		return nil, fmt.Errorf("open storage %s: %w", storage, err)
	}
	return db, nil
}

// precheckStore refuses a target that is not in the registry at storage (the flag's, else
// the running dev's), before a run starts; with no storage known the workflow refuses it.
func (g *globalOptions) precheckStore(ctx context.Context, storage string, dev devState, t store.Target) error {
	logger, err := g.logger("warn")
	if err != nil {
		return err
	}
	if storage = cmp.Or(storage, dev.Storage); storage == "" {
		return nil
	}
	db, err := openStorage(ctx, storage, "walkeeper-cli", logger, store.DefaultOptions())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close(context.Background()) }()
	if _, err := db.Open(ctx, t); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("check store %s in %s: %w", t, storage, err)
		}
		return &storeMissingError{target: t, worker: devWorkerFor(storage, dev)}
	}
	return nil
}

// devWorkerFor is the create hint's worker: the first HTTP URL of dev when storage is the
// dev's (its workers serve no other), else "" (a placeholder).
func devWorkerFor(storage string, dev devState) string {
	if storage == "" || storage != dev.Storage || len(dev.HTTP) == 0 {
		return ""
	}
	return dev.HTTP[0]
}
