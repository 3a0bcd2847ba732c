package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// runningQuery lists the merges and compactions in flight.
var runningQuery = mergesAndCompactions + ` AND ExecutionStatus="Running"`

func newStatusCmd(g *globalOptions) *cobra.Command {
	var (
		storage  string
		deadline time.Duration
		after    string
		limit    int
		shards   shardsPage
	)
	cmd := &cobra.Command{
		Use:   "status [TARGET]",
		Short: "Show stores, pending generations and running merges",
		Long: `Without TARGET: a page of stores (from --storage) with their base version, runs, rows and
pending generations, and of running MergeWal/CompactBase workflows (from Temporal): at most
--limit of each, so that the command costs the same on a fleet of any size. When there are
more stores, the last line gives the --after that prints the next page.

With TARGET (<kind>:<name>): the store's base table, its debt over every shard (shards,
pending generations and bytes, the most in one shard, the oldest), and a page of its shards
in shard id order (--shards-limit of them, after --shards-after) with pending generations,
pending bytes and merged watermark; when more shards follow, the last line gives the
--shards-after that prints the next page. Then the target's MergeWal and CompactBase
workflows and, while one runs, its live status (phase, shard, pass, blocked reason) from the
workflow's "status" query.

--storage is read directly (object storage or file://; a file:// root that does not exist is
refused, never created). Without --storage and $WALKEEPER_STORAGE, a running 'walkeeper dev'
(its <data>/dev.json) supplies the storage, and the Temporal address unless --temporal or
$WALKEEPER_TEMPORAL is set; with neither, only Temporal is asked.`,
		Example: `  walkeeper status                    # under a running 'walkeeper dev': its storage and Temporal
  walkeeper status --limit 200 --after generic:demo   # the page of stores after generic:demo
  walkeeper status generic:demo
  walkeeper status generic:demo --shards-limit 200 --shards-after 97908969-7ded-55ff-a5f4-1d804332abc7
  walkeeper status --storage file://./.cache/dev/storage     # a relative path: file://./<path>
  walkeeper status --storage file:///srv/walkeeper/storage`,
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			target, err := parseOptionalTarget(a)
			if err != nil {
				return err
			}
			from, err := parsePages(cmd, target, after, limit, shards)
			if err != nil {
				return err
			}
			if err := contract.CheckMergeRunTimeout(deadline); err != nil {
				return cli.Usagef("--merge-run-timeout: %v", err)
			}
			dev := g.devDefaults(cmd)
			storage = cmp.Or(storage, dev.Storage)
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			// Storage stats are useful even when Temporal is down: report the dial error
			// after printing them (exit status 1).
			dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
			c, logger, dialErr := g.dial(dctx)
			dcancel()
			switch {
			case dialErr == nil:
				defer c.Close()
			case !errors.As(dialErr, new(*unreachableError)) || storage == "":
				return dialErr
			}
			var db *store.DB
			if storage != "" {
				db, err = openStorage(ctx, storage, "walkeeper-status", logger, store.DefaultOptions())
				if err != nil {
					return err
				}
				defer func() { _ = db.Close(context.Background()) }()
			}
			out, sv := cmd.OutOrStdout(), stuckView{c: c, namespace: g.temporal.Namespace, deadline: deadline} // c is nil when unreachable
			if target == nil {
				err = statusAll(ctx, out, sv, db, logger, from, limit)
			} else {
				err = statusTarget(ctx, out, sv, db, *target, shards)
			}
			var missing *storeMissingError
			if errors.As(err, &missing) {
				missing.worker = devWorkerFor(storage, dev) // the create hint merge gives
			}
			if err == nil && dialErr != nil {
				fmt.Fprintf(out, "Temporal: unreachable, workflows not shown\n")
				return dialErr
			}
			return err
		},
	}
	worker.StringKnobVar(cmd.Flags(), &storage, "storage", "", "storage root URL to read store stats from")
	cmd.Flags().StringVar(&after, "after", "", "without TARGET: list the stores after this <kind>:<name> (the cursor the previous page printed)")
	cmd.Flags().IntVar(&limit, "limit", defaultStatusLimit, fmt.Sprintf("without TARGET: at most this many stores and running workflows (1 to %d)", store.MaxListPage))
	cmd.Flags().StringVar(&shards.after, "shards-after", "", "with TARGET: list the shards after this shard id (the cursor the previous page printed)")
	cmd.Flags().IntVar(&shards.limit, "shards-limit", defaultStatusLimit, fmt.Sprintf("with TARGET: at most this many shards (1 to %d)", store.MaxStatsShards))
	cmd.Flags().DurationVar(&deadline, "merge-run-timeout", contract.DefaultMergeRunTimeout,
		"the workers' --merge-run-timeout: the deadline of a run started without a run timeout (10s to 168h)")
	return cmd
}

// defaultStatusLimit is how many stores and running workflows `walkeeper status` prints.
const defaultStatusLimit = 50

// shardsPage is the page of a target's shards `walkeeper status TARGET` prints.
type shardsPage struct {
	after string // "": from the first shard
	limit int
}

// parsePages checks the flags that page the list of stores (--after, --limit: no TARGET) and
// a store's shards (--shards-after, --shards-limit: a TARGET), and parses --after (zero: from
// the first store).
func parsePages(cmd *cobra.Command, target *store.Target, after string, limit int,
	shards shardsPage) (from store.Target, err error) {
	flags := cmd.Flags()
	switch {
	case target != nil && (flags.Changed("after") || flags.Changed("limit")):
		return from, cli.Usagef("--after and --limit page the list of stores: they take no TARGET")
	case limit < 1 || limit > store.MaxListPage:
		return from, cli.Usagef("--limit %d: want 1 to %d", limit, store.MaxListPage)
	case after != "":
		if from, err = store.ParseTarget(after); err != nil {
			return from, cli.Usagef("--after: %v", err)
		}
	}
	switch {
	case target == nil && (flags.Changed("shards-after") || flags.Changed("shards-limit")):
		return from, cli.Usagef("--shards-after and --shards-limit page a store's shards: they need a TARGET")
	case shards.limit < 1 || shards.limit > store.MaxStatsShards:
		return from, cli.Usagef("--shards-limit %d: want 1 to %d", shards.limit, store.MaxStatsShards)
	case shards.after != "" && !store.IsShardID(shards.after):
		return from, cli.Usagef("--shards-after %q: not a shard id (the cursor a previous page printed)", contract.Clip(shards.after, 256))
	}
	return from, nil
}

// statusAll prints the page of at most limit stores after from and of running workflows.
// Memory, output and requests are bounded by limit, whatever the fleet's size.
func statusAll(ctx context.Context, out io.Writer, sv stuckView, db *store.DB, logger *zap.Logger, from store.Target, limit int) error {
	c := sv.c
	if db != nil {
		page, err := db.ListTargets(ctx, store.Kinds, from, limit)
		if err != nil {
			return fmt.Errorf("list stores: %w", err)
		}
		var running map[string][]string
		if c != nil {
			if running, err = runningOf(ctx, c, page.Stores); err != nil {
				return err
			}
		}
		after := ""
		if from.Kind != "" {
			after = " after " + from.String()
		}
		fmt.Fprintf(out, "Stores (%d%s):\n", len(page.Stores), after)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TARGET\tBASE VERSION\tRUNS\tROWS\tPENDING\tPENDING BYTES\tMAX SHARD PENDING\tOLDEST PENDING\tRUNNING")
		for _, info := range page.Stores {
			st, err := targetStats(ctx, db, info.Target, shardsPage{}) // the totals alone
			if err != nil {
				logger.Warn("stats failed", zap.String("target", info.Target.String()), zap.Error(err))
				fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t-\t-\t-\t%s\n", info.Target, "error: "+err.Error())
				continue
			}
			tot := st.Totals
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", info.Target, st.BaseVersion, st.Runs, st.Rows,
				tot.PendingGenerations, contract.FormatBytes(tot.PendingBytes), tot.MaxShardPending, age(tot.OldestPending),
				dash(strings.Join(running[info.Target.String()], ",")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.Next.Kind != "" {
			// The same command line plus --after: it may name --storage and Temporal flags.
			fmt.Fprintf(out, "  more: run again with --after %s for the next page\n", page.Next)
		}
	} else {
		fmt.Fprintln(out, "Stores: pass --storage URL (or set WALKEEPER_STORAGE, or run 'walkeeper dev') to list stores and pending generations.")
	}
	fmt.Fprintln(out)
	if c == nil {
		return nil
	}
	running, total, err := listRunning(ctx, c, limit)
	if err != nil {
		return err
	}
	shown := ""
	if int64(len(running)) < total {
		shown = fmt.Sprintf(", the %d started last shown; 'walkeeper queries' prints the saved view of them all", len(running))
	}
	fmt.Fprintf(out, "Running workflows (%d%s):\n", total, shown)
	if len(running) == 0 {
		fmt.Fprintln(out, "  none")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tTARGET\tWORKFLOW ID\tRUN ID\tSTARTED\tSTUCK")
	described := 0
	for _, r := range running {
		stuck := "-"
		// Only runs older than a minute are described, and at most 100 of them: a young run
		// cannot have failed its workflow task three times. One that fails to describe is "-".
		if time.Since(r.Start) >= stuckMinAge && described < maxStuckDescribes {
			described++
			if d, err := c.DescribeWorkflowExecution(ctx, r.WorkflowID, r.RunID); err == nil {
				stuck = dash(sv.described(ctx, d))
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s ago\t%s\n", r.Workflow, foreignText(r.target), foreignText(r.WorkflowID),
			foreignText(r.RunID), time.Since(r.Start).Round(time.Second), contract.Printable(stuck))
	}
	return tw.Flush()
}

// runningWorkflow is a running run with the target it merges.
type runningWorkflow struct {
	historyRun
	target string
}

// listRunning returns up to limit running merges and compactions (visibility lists the
// newest first), sorted by target, and how many run in all.
func listRunning(ctx context.Context, c client.Client, limit int) ([]runningWorkflow, int64, error) {
	count, err := countWorkflows(ctx, c, runningQuery)
	if err != nil {
		return nil, 0, fmt.Errorf("count running workflows: %w", err)
	}
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: runningQuery, PageSize: int32(limit)})
	if err != nil {
		return nil, 0, fmt.Errorf("list running workflows: %w", err)
	}
	execs := resp.GetExecutions()
	out := make([]runningWorkflow, 0, min(len(execs), limit))
	for _, e := range execs[:min(len(execs), limit)] {
		r := runningWorkflow{historyRun: historyRunOf(e, uiLinks{}), target: targetFromWorkflowID(e.GetExecution().GetWorkflowId())}
		if s := observedString(e.GetSearchAttributes().GetIndexedFields()[contract.WalTargetName]); s != nil {
			r.target = *s
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b runningWorkflow) int {
		return cmp.Or(strings.Compare(a.target, b.target), strings.Compare(a.Workflow, b.Workflow))
	})
	return out, max(count, int64(len(out))), nil
}

// countWorkflows is how many runs the visibility query matches.
func countWorkflows(ctx context.Context, c client.Client, query string) (int64, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	return resp.GetCount(), err
}

// runningOfChunk is how many stores one visibility query of runningOf names: a query of a
// whole page of 1,000 would carry 2,000 workflow IDs.
const runningOfChunk = 100

// runningOf returns the types of the running merges and compactions of stores, by target:
// visibility requests by workflow ID, one per runningOfChunk stores.
func runningOf(ctx context.Context, c client.Client, stores []store.StoreInfo) (map[string][]string, error) {
	out := make(map[string][]string, len(stores))
	for chunk := range slices.Chunk(stores, runningOfChunk) {
		ids := make([]string, 0, 2*len(chunk))
		for _, info := range chunk {
			ids = append(ids, strconv.Quote(contract.MergeWalID(info.Target)), strconv.Quote(contract.CompactID(info.Target)))
		}
		query := fmt.Sprintf("ExecutionStatus='Running' AND WorkflowId IN (%s)", strings.Join(ids, ","))
		// A workflow ID has at most one running run, so one page holds them all.
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(len(ids))})
		if err != nil {
			return nil, fmt.Errorf("list running workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			t := targetFromWorkflowID(e.GetExecution().GetWorkflowId())
			out[t] = append(out[t], foreignText(e.GetType().GetName()))
		}
	}
	for _, types := range out {
		slices.Sort(types)
	}
	return out, nil
}

// targetFromWorkflowID maps "merge-wal/<kind>/<name>" and "compact/<kind>/<name>" back to
// "<kind>:<name>" (names never contain "/").
func targetFromWorkflowID(id string) string {
	parts := strings.Split(id, "/")
	if len(parts) == 3 {
		return parts[1] + ":" + parts[2]
	}
	return "?"
}

// targetStats reads t's stats with the page of shards pg names (limit 0: none, the totals alone).
func targetStats(ctx context.Context, db *store.DB, t store.Target, pg shardsPage) (store.Stats, error) {
	s, err := db.Open(ctx, t)
	if errors.Is(err, store.ErrNotFound) {
		return store.Stats{}, &storeMissingError{target: t} // bad input (exit 2), as for merge
	}
	if err != nil {
		return store.Stats{}, err
	}
	return s.StatsPage(ctx, pg.after, pg.limit)
}

func statusTarget(ctx context.Context, out io.Writer, sv stuckView, db *store.DB, t store.Target, pg shardsPage) error {
	fmt.Fprintf(out, "Target %s\n", t)
	if db != nil {
		st, err := targetStats(ctx, db, t, pg)
		if errors.As(err, new(*storeMissingError)) {
			return err // names the target and how to create it
		}
		if err != nil {
			return fmt.Errorf("stats of %s: %w", t, err)
		}
		if err := printTargetStats(out, st, pg); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, "  (pass --storage URL, set WALKEEPER_STORAGE or run 'walkeeper dev' for base table and shard stats)")
	}
	fmt.Fprintln(out)
	if sv.c == nil {
		return nil
	}
	if err := printWorkflow(ctx, out, sv, "MergeWal", contract.MergeWalID(t)); err != nil {
		return err
	}
	return printWorkflow(ctx, out, sv, "CompactBase", contract.CompactID(t))
}

// printTargetStats prints the base table, the totals over every shard and the page of shards
// st lists, and says how many shards it left out and how to list the next page.
func printTargetStats(out io.Writer, st store.Stats, pg shardsPage) error {
	tot := st.Totals
	fmt.Fprintf(out, "  base version %d, %d runs, %d rows\n", st.BaseVersion, st.Runs, st.Rows)
	if tot.PendingGenerations > 0 {
		fmt.Fprintf(out, "  %d shards, %d with pending generations: %d pending (%s), at most %d in one shard, the oldest sealed %s ago\n",
			tot.Shards, tot.PendingShards, tot.PendingGenerations, contract.FormatBytes(tot.PendingBytes), tot.MaxShardPending, age(tot.OldestPending))
	} else {
		fmt.Fprintf(out, "  %d shards, no pending generations\n", tot.Shards)
	}
	if st.Quarantined > 0 {
		fmt.Fprintf(out, "  %d quarantined object(s): set aside, not read (docs/OPERATIONS.md §8)\n", st.Quarantined)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SHARD\tPENDING\tPENDING BYTES\tWATERMARK\tOLDEST PENDING")
	for _, sh := range st.Shards {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\n", sh.Shard, sh.PendingGenerations, contract.FormatBytes(sh.PendingBytes), sh.Watermark, age(sh.OldestPending))
	}
	fmt.Fprintf(tw, "  all %d shards\t%d\t%s\t\t%s\n", tot.Shards, tot.PendingGenerations, contract.FormatBytes(tot.PendingBytes), age(tot.OldestPending))
	if err := tw.Flush(); err != nil {
		return err
	}
	switch unlisted := tot.Shards - len(st.Shards); {
	case st.Next != "":
		// The same command line plus --shards-after: it may name --storage and Temporal flags.
		_, err := fmt.Fprintf(out, "  %d shards not listed: run again with --shards-after %s for the next %d\n", unlisted, st.Next, pg.limit)
		return err
	case unlisted > 0:
		_, err := fmt.Fprintf(out, "  %d shards not listed: those up to --shards-after %s\n", unlisted, pg.after)
		return err
	}
	return nil
}

// printWorkflow prints the latest run of workflow id and, while it runs, its status query.
func printWorkflow(ctx context.Context, out io.Writer, sv stuckView, typ, id string) error {
	c := sv.c
	d, err := c.DescribeWorkflow(ctx, id, "")
	if errors.As(err, new(*serviceerror.NotFound)) {
		fmt.Fprintf(out, "%s %s: no run on record\n", typ, id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("describe %s: %w", id, err)
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	status := info.GetStatus()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\n", typ, id)
	fmt.Fprintf(tw, "  run id\t%s\n", info.GetExecution().GetRunId())
	fmt.Fprintf(tw, "  status\t%s\n", status.String())
	fmt.Fprintf(tw, "  started\t%s\n", info.GetStartTime().AsTime().Local().Format(time.RFC3339))
	if held := info.GetType().GetName(); held != typ {
		// Someone with namespace access ran another workflow under walkeeper's ID: not a run
		// of typ, whose status query it would not answer.
		fmt.Fprintf(tw, "  type\t%s, not %s: not walkeeper's run\n", foreignText(held), typ)
		return flushLine(tw, out)
	}
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if ct := info.GetCloseTime(); ct != nil {
			fmt.Fprintf(tw, "  closed\t%s\n", ct.AsTime().Local().Format(time.RFC3339))
		}
		return flushLine(tw, out)
	}
	if stuck := sv.described(ctx, d.RawResponse); stuck != "" {
		fmt.Fprintf(tw, "  stuck\t%s\n", stuck)
	}
	if tq, err := c.DescribeTaskQueue(ctx, contract.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW); err == nil && len(tq.GetPollers()) == 0 {
		fmt.Fprintf(tw, "  live status\tunavailable: no worker is polling task queue %s\n", contract.TaskQueue)
		return flushLine(tw, out)
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, id, "", contract.StatusQuery)
	if err != nil {
		fmt.Fprintf(tw, "  live status\tunavailable: %v\n", err)
		return flushLine(tw, out)
	}
	if err := printLiveStatus(tw, out, typ, v, d.RawResponse.GetPendingActivities()); err != nil {
		return err
	}
	_, err = fmt.Fprintln(out)
	return err
}

func flushLine(tw *tabwriter.Writer, out io.Writer) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out)
	return err
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}
