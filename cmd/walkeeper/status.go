package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"io"
	"sort"
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
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// runningQuery lists the merges and compactions in flight.
const runningQuery = "(WorkflowType='MergeWal' OR WorkflowType='CompactBase') AND ExecutionStatus='Running'"

func newStatusCmd(g *globalOptions) *cobra.Command {
	var (
		storage  string
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [TARGET]",
		Short: "Show stores, pending generations and running merges",
		Long: `Without TARGET: list every store (from --storage) with its base version, runs, rows and
pending generations, and every running MergeWal/CompactBase workflow (from Temporal).

With TARGET (<kind>:<name>): the store's base table and, per shard, pending generations,
pending bytes and merged watermark; then the target's MergeWal and CompactBase workflows
and, while one runs, its live status (phase, shard, pass, blocked reason) from the
workflow's "status" query.

--storage is read directly (object storage or file://). Without --storage and
$WALKEEPER_STORAGE, a running 'walkeeper dev' (its <data>/dev.json) supplies the storage, and
the Temporal address unless --temporal or $WALKEEPER_TEMPORAL is set; with neither, only
Temporal is asked.`,
		Example: `  walkeeper status                    # under a running 'walkeeper dev': its storage and Temporal
  walkeeper status generic:demo
  walkeeper status --storage file://./.cache/dev/storage     # a relative path: file://./<path>
  walkeeper status --storage file:///srv/walkeeper/storage`,
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			target, err := parseOptionalTarget(a)
			if err != nil {
				return err
			}
			if err := contract.CheckMergeRunTimeout(deadline); err != nil {
				return cli.Usagef("--merge-run-timeout: %v", err)
			}
			devSt, live := g.devDefaults(cmd)
			storage = storageOrDev(storage, devSt, live)
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			tc, err := g.temporalConfig()
			if err != nil {
				return err
			}
			logger, err := g.logger("warn")
			if err != nil {
				return err
			}
			// Storage stats are useful even when Temporal is down: report the dial error
			// after printing them (exit status 1).
			dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
			c, dialErr := temporaladmin.Dial(dctx, tc.Config, logger)
			dcancel()
			dialErr = temporalUnreachable(tc, dialErr)
			if dialErr == nil {
				defer c.Close()
			} else if storage == "" {
				return dialErr
			}
			var db *store.DB
			if storage != "" {
				db, err = openStorage(ctx, storage, "walkeeper-status", logger)
				if err != nil {
					return err
				}
				defer func() { _ = db.Close(context.Background()) }()
			}
			out, sv := cmd.OutOrStdout(), stuckView{c: c, namespace: tc.Namespace, deadline: deadline} // c is nil when unreachable
			if target == nil {
				err = statusAll(ctx, out, sv, db, logger)
			} else {
				err = statusTarget(ctx, out, sv, db, *target)
			}
			if err == nil && dialErr != nil {
				fmt.Fprintf(out, "Temporal: unreachable, workflows not shown\n")
				return dialErr
			}
			return err
		},
	}
	worker.StringKnobVar(cmd.Flags(), &storage, "storage", "", "storage root URL to read store stats from")
	cmd.Flags().DurationVar(&deadline, "merge-run-timeout", contract.DefaultMergeRunTimeout,
		"the workers' --merge-run-timeout: the deadline of a run started without a run timeout (10s to 168h)")
	return cmd
}

func statusAll(ctx context.Context, out io.Writer, sv stuckView, db *store.DB, logger *zap.Logger) error {
	c := sv.c
	var running []runningWorkflow
	if c != nil {
		var err error
		if running, err = listRunning(ctx, c); err != nil {
			return err
		}
	}
	if db != nil {
		infos, err := db.List(ctx, "")
		if err != nil {
			return fmt.Errorf("list stores: %w", err)
		}
		fmt.Fprintf(out, "Stores (%d):\n", len(infos))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TARGET\tBASE VERSION\tRUNS\tROWS\tPENDING\tPENDING BYTES\tMAX SHARD PENDING\tOLDEST PENDING\tRUNNING")
		for _, info := range infos {
			st, err := targetStats(ctx, db, info.Target)
			if err != nil {
				logger.Warn("stats failed", zap.String("target", info.Target.String()), zap.Error(err))
				fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t-\t-\t-\t%s\n", info.Target, "error: "+err.Error())
				continue
			}
			pending, bytes, maxShard, oldest := 0, int64(0), 0, time.Time{}
			for _, sh := range st.Shards {
				pending += sh.PendingGenerations
				bytes += sh.PendingBytes
				maxShard = max(maxShard, sh.PendingGenerations)
				if !sh.OldestPending.IsZero() && (oldest.IsZero() || sh.OldestPending.Before(oldest)) {
					oldest = sh.OldestPending
				}
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", info.Target, st.BaseVersion, st.Runs, st.Rows,
				pending, humanBytes(bytes), maxShard, age(oldest), runningFor(running, info.Target.String()))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	} else {
		fmt.Fprintln(out, "Stores: pass --storage URL (or set WALKEEPER_STORAGE, or run 'walkeeper dev') to list stores and pending generations.")
		fmt.Fprintln(out)
	}
	if c == nil {
		return nil
	}
	fmt.Fprintf(out, "Running workflows (%d):\n", len(running))
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
		// cannot have failed its workflow task three times.
		if time.Since(r.start) >= stuckMinAge && described < maxStuckDescribes {
			described++
			stuck = dash(sv.note(ctx, r.id, r.runID))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s ago\t%s\n", r.typ, r.target, r.id, r.runID, time.Since(r.start).Round(time.Second), stuck)
	}
	return tw.Flush()
}

type runningWorkflow struct {
	typ, target, id, runID string
	start                  time.Time
}

func listRunning(ctx context.Context, c client.Client) ([]runningWorkflow, error) {
	var out []runningWorkflow
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         runningQuery,
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list running workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			r := runningWorkflow{
				typ:   e.GetType().GetName(),
				id:    e.GetExecution().GetWorkflowId(),
				runID: e.GetExecution().GetRunId(),
				start: e.GetStartTime().AsTime(),
			}
			r.target = targetFromWorkflowID(r.id)
			if s := observedString(e.GetSearchAttributes().GetIndexedFields()[contract.WalTargetName]); s != nil {
				r.target = *s
			}
			out = append(out, r)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].target != out[j].target {
			return out[i].target < out[j].target
		}
		return out[i].typ < out[j].typ
	})
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

func runningFor(running []runningWorkflow, target string) string {
	var types []string
	for _, r := range running {
		if r.target == target {
			types = append(types, r.typ)
		}
	}
	if len(types) == 0 {
		return "-"
	}
	return strings.Join(types, ",")
}

func targetStats(ctx context.Context, db *store.DB, t store.Target) (store.Stats, error) {
	s, err := db.Open(ctx, t)
	if err != nil {
		return store.Stats{}, err
	}
	return s.Stats(ctx)
}

func statusTarget(ctx context.Context, out io.Writer, sv stuckView, db *store.DB, t store.Target) error {
	c := sv.c
	fmt.Fprintf(out, "Target %s\n", t)
	if db != nil {
		st, err := targetStats(ctx, db, t)
		if err != nil {
			return fmt.Errorf("stats of %s: %w", t, err)
		}
		fmt.Fprintf(out, "  base version %d, %d runs, %d rows\n", st.BaseVersion, st.Runs, st.Rows)
		if st.Quarantined > 0 {
			fmt.Fprintf(out, "  %d quarantined object(s): set aside, not read (docs/OPERATIONS.md §8)\n", st.Quarantined)
		}
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SHARD\tPENDING\tPENDING BYTES\tWATERMARK\tOLDEST PENDING")
		total, totalBytes := 0, int64(0)
		for _, sh := range st.Shards {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\n", sh.Shard, sh.PendingGenerations, humanBytes(sh.PendingBytes), sh.Watermark, age(sh.OldestPending))
			total += sh.PendingGenerations
			totalBytes += sh.PendingBytes
		}
		fmt.Fprintf(tw, "  total\t%d\t%s\t\t\n", total, humanBytes(totalBytes))
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, "  (pass --storage URL, set WALKEEPER_STORAGE or run 'walkeeper dev' for base table and shard stats)")
	}
	fmt.Fprintln(out)
	if c == nil {
		return nil
	}
	for _, wf := range []struct{ typ, id string }{
		{"MergeWal", contract.MergeWalID(t)},
		{"CompactBase", contract.CompactID(t)},
	} {
		if err := printWorkflow(ctx, out, sv, wf.typ, wf.id); err != nil {
			return err
		}
	}
	return nil
}

// printWorkflow prints the latest run of workflow id and, while it runs, its status query.
func printWorkflow(ctx context.Context, out io.Writer, sv stuckView, typ, id string) error {
	c := sv.c
	d, err := c.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
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
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if ct := info.GetCloseTime(); ct != nil {
			fmt.Fprintf(tw, "  closed\t%s\n", ct.AsTime().Local().Format(time.RFC3339))
		}
		return flushLine(tw, out)
	}
	if st := sv.described(ctx, d.RawResponse); st.Reason != "" {
		fmt.Fprintf(tw, "  stuck\t%s\n", stuckText(st))
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

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
