package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// newQuarantineCmd is `walkeeper quarantine TARGET OBJECT_KEY (--reason TEXT | --release)`
// (store/quarantine.go, store/release.go).
func newQuarantineCmd(g *globalOptions) *cobra.Command {
	var reason string
	var asJSON, release bool
	// What a release reads follows the workers' settings (a WAL object's limit decision 0731, a
	// run's decision 0771): the command takes them as the workers do, so that it reads the
	// objects they wrote.
	cfg := worker.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "quarantine TARGET OBJECT_KEY (--reason TEXT | --release)",
		Short: "Set aside a damaged generation, WAL object or base run so that its store merges, appends and reads again",
		Long: `Set aside one damaged object of a store: a pending generation, an unsealed WAL object or a
base run whose checksum or decoding failed (the ErrCorrupt message and the
walkeeper_corrupt_objects_total alert name its key). Until then a generation blocks its shard's
merges, full listings of the store and reads in its key range; a run blocks reads in its key
range and compaction; a WAL object stops its shard's owner appending.

A new manifest version moves the object's entry to a quarantined list: reads, merges and
compactions skip it from then on, and clean-up never deletes the object, so it stays in place
for repair or forensics. The rows that only that object held are no longer read (older versions
of those keys become visible again, newer ones elsewhere are unaffected); a WAL object's rows
cannot be counted, since it does not decode, and its owner replays the objects around it. Prefer restoring the
object from a backup first; quarantine is for when that is not possible. Running it again for
the same key changes nothing. It talks to storage directly; workers need no restart.

With --release it puts back an object set aside earlier that has since been repaired or
restored in place, only if it passes its checks: a base run must be at most
--merge-budget-bytes long (3 GiB when 0) and decode into exactly the rows and key range
recorded when it was set aside, a WAL object must be at most the read limit of
--memtable-bytes and --group-commit-max-rows, pass its header checksum, and its shard must not
have sealed past it (its owner replays it on its next append). Give these flags the workers'
settings (they read the workers' environment variables). Anything else is refused and nothing is written. A generation cannot be put back.`,
		Example: `  walkeeper quarantine generic:demo generic/demo/_mem_wal/<shard>/gen/00000000000000000042-1.arrow \
    --reason "checksum mismatch, no backup" --storage 's3://bucket?prefix=walkeeper/'
  walkeeper quarantine generic:demo generic/demo/data/<run>.parquet --release --storage 's3://bucket?prefix=walkeeper/'`,
		Args: cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			target, err := parseTarget(a[0])
			if err != nil {
				return err
			}
			switch err := cfg.Validate(); {
			case cfg.Storage == "":
				return cli.Usagef("--storage is required (or set WALKEEPER_STORAGE)")
			case err != nil:
				return cli.Usagef("%v", err)
			case release && reason != "":
				return cli.Usagef("--reason is for setting an object aside, not for --release")
			case !release && reason == "":
				return cli.Usagef("--reason is required: it is recorded in the manifest next to the object")
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			logger, err := g.logger("warn")
			if err != nil {
				return err
			}
			opts := store.DefaultOptions()
			opts.MemtableBytes, opts.GroupCommitMaxRows = cfg.MemtableBytes, cfg.GroupCommitMaxRows
			if cfg.MergeBudgetBytes > 0 {
				opts.Budget = store.NewBudget(cfg.MergeBudgetBytes)
			}
			db, err := openStorage(ctx, cfg.Storage, "walkeeper-quarantine", logger, opts)
			if err != nil {
				return err
			}
			defer func() { _ = db.Close(context.Background()) }()
			s, err := db.Open(ctx, target)
			if errors.Is(err, store.ErrNotFound) {
				// Bad input (exit 2), as for merge, with the same create hint.
				dev, _ := runningDev()
				return &storeMissingError{target: target, worker: devWorkerFor(cfg.Storage, dev)}
			}
			if err != nil {
				return err
			}
			var res store.QuarantineResult
			if release {
				res, err = s.Release(ctx, a[1])
			} else {
				res, err = s.Quarantine(ctx, a[1], reason)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, res)
			}
			printQuarantineResult(out, res, release)
			return nil
		},
	}
	worker.StringKnobVar(cmd.Flags(), &cfg.Storage, "storage", "", "storage root URL")
	cfg.RegisterKnobFlags(cmd.Flags(), "memtable-bytes", "group-commit-max-rows", "merge-budget-bytes")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the manifest next to the object (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&release, "release", false, "put back a repaired object set aside earlier, only if it passes its checks")
	return cmd
}

// printQuarantineResult says what quarantine, or with release quarantine --release, did.
func printQuarantineResult(out io.Writer, res store.QuarantineResult, release bool) {
	verb, kept, rows := "quarantined", " (kept in place)", fmt.Sprintf("%d no longer read, keys %q..%q", res.Rows, res.MinKey, res.MaxKey)
	if release {
		verb, kept, rows = "released", "", fmt.Sprintf("%d read again, keys %q..%q", res.Rows, res.MinKey, res.MaxKey)
	}
	what := res.Kind
	switch {
	case res.AlreadyQuarantined:
		fmt.Fprintf(out, "%s was already quarantined (manifest version %d); nothing changed\n", res.Path, res.ManifestVersion)
		return
	case res.NotQuarantined:
		fmt.Fprintf(out, "%s is not quarantined (manifest version %d); nothing changed\n", res.Path, res.ManifestVersion)
		return
	case res.Kind == "wal" && release:
		what, rows = "WAL object of shard "+res.Shard, "replayed by the shard's owner on its next append"
	case res.Kind == "wal":
		what, rows = "WAL object of shard "+res.Shard, "the ones only it held, not counted (it does not decode)"
	case res.Kind == "generation": // set aside only: a generation cannot be put back
		what = fmt.Sprintf("generation %d of shard %s", res.Generation, res.Shard)
	}
	fmt.Fprintf(out, "%s %s\n  object    %s%s\n  rows      %s\n  manifest  version %d\n", verb, what, res.Path, kept, rows, res.ManifestVersion)
}
