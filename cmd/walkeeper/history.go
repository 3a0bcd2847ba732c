package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
)

const (
	defaultHistoryLimit = 50
	// maxHistoryLimit bounds what one command holds and prints; Temporal Web and `temporal
	// workflow list` page through a store's whole history.
	maxHistoryLimit = 10000
	// historyPageSize bounds one visibility page; --limit bounds the whole listing.
	historyPageSize = 100
)

func newHistoryCmd(g *globalOptions) *cobra.Command {
	var (
		asJSON bool
		limit  int
		ui     string
	)
	cmd := &cobra.Command{
		Use:   "history TARGET",
		Short: "List a store's MergeWal and CompactBase runs from Temporal visibility",
		Long: `List the MergeWal and CompactBase runs of TARGET (<kind>:<name>), newest first, from
Temporal visibility (the query WalTarget="<kind>:<name>"), one row per run: when it started,
the workflow, what triggered it, the store's pending generations at start, the generations
reclaimed, the billable Temporal actions the merge cost, the bytes merged, how long it took,
its result, and its page in the Temporal Web UI. Runs of a continue-as-new chain are listed one by one.

The trigger, pending-at-start, reclaimed and bytes columns come from the search attributes
WalTrigger, WalPendingAtStart, WalReclaimed and WalBytesMerged (or the run's memo) that the
workflows record; the actions column is the memo's "actions", MergeWal's own count of its
chain's Temporal Cloud billable actions (starts, activities, listings, upserts, signals;
docs/TEMPORAL.md "What a merge and a sweep cost in actions"). "-" marks a run that does not
carry one.

At most --limit runs are read, page by page. Under a running 'walkeeper dev' its Temporal
and Web UI are used unless --temporal/--ui (or their environment variables) say otherwise.`,
		Example: `  walkeeper history generic:demo
  walkeeper history generic:demo --limit 10 --json
  walkeeper history generic:demo --ui https://temporal.example.com`,
		Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			t, err := parseTarget(a[0])
			if err != nil {
				return err
			}
			if limit < 1 || limit > maxHistoryLimit {
				return cli.Usagef("--limit %d: want 1 to %d", limit, maxHistoryLimit)
			}
			st := g.devDefaults(cmd)
			return g.withTemporal(cmd, func(ctx context.Context, c client.Client) error {
				links := uiLinks{base: uiBaseOrDev(ui, st), namespace: g.temporal.Namespace}
				runs, err := listHistory(ctx, c, t, limit, links)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(out, runs)
				}
				return writeHistoryTable(out, t, g.temporal.Namespace, runs, limit)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	f.IntVar(&limit, "limit", defaultHistoryLimit, fmt.Sprintf("list at most this many runs, newest first (1 to %d)", maxHistoryLimit))
	registerUIFlag(cmd, &ui)
	return cmd
}

// historyRun is one run in `walkeeper history`; absent observations are nil (null, "-").
type historyRun struct {
	Workflow       string     `json:"workflow"`
	WorkflowID     string     `json:"workflow_id"`
	RunID          string     `json:"run_id"`
	Start          time.Time  `json:"start_time"`
	Close          *time.Time `json:"close_time"`
	DurationSec    *float64   `json:"duration_seconds"`
	Result         string     `json:"result"`
	Trigger        *string    `json:"trigger"`
	PendingAtStart *int64     `json:"pending_at_start"`
	Reclaimed      *int64     `json:"reclaimed"`
	BytesMerged    *int64     `json:"bytes_merged"`
	Passes         *int64     `json:"passes"`
	Actions        *int64     `json:"actions"`
	URL            string     `json:"url"`
}

// listHistory reads at most limit runs of t, newest first, a page at a time.
func listHistory(ctx context.Context, c client.Client, t store.Target, limit int, links uiLinks) ([]historyRun, error) {
	runs := []historyRun{} // --json prints [] for none
	query := fmt.Sprintf("%s=%q AND %s", contract.WalTargetName, t.String(), mergesAndCompactions)
	var token []byte
	for len(runs) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         query,
			PageSize:      int32(min(historyPageSize, limit-len(runs))),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list runs of %s: %w", t, err)
		}
		execs := resp.GetExecutions()
		for _, e := range execs[:min(len(execs), limit-len(runs))] {
			runs = append(runs, historyRunOf(e, links))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return runs, nil
}

func historyRunOf(e *workflowpb.WorkflowExecutionInfo, links uiLinks) historyRun {
	r := historyRun{
		Workflow:   e.GetType().GetName(),
		WorkflowID: e.GetExecution().GetWorkflowId(),
		RunID:      e.GetExecution().GetRunId(),
		Start:      e.GetStartTime().AsTime(),
		Result:     resultName(e.GetStatus()),
	}
	r.URL = links.run(r.WorkflowID, r.RunID)
	if ct := e.GetCloseTime(); ct != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		r.Close = new(ct.AsTime())
		r.DurationSec = new(r.Close.Sub(r.Start).Seconds())
	}
	sa := e.GetSearchAttributes().GetIndexedFields()
	memo := e.GetMemo().GetFields()
	r.Trigger = observedString(sa[contract.WalTriggerName], memo[contract.MemoTrigger])
	if r.Trigger != nil {
		r.Trigger = new(contract.Clip(*r.Trigger, maxForeignTextBytes))
	}
	r.PendingAtStart = observedInt(sa[contract.WalPendingAtStartName], memo[contract.MemoPendingAtStart])
	r.Reclaimed = observedInt(sa[contract.WalReclaimedName], memo[contract.MemoReclaimed])
	r.BytesMerged = observedInt(sa[contract.WalBytesMergedName], memo[contract.MemoBytesMerged])
	r.Passes = observedInt(sa[contract.WalPassesName], memo[contract.MemoPasses])
	r.Actions = observedInt(memo[contract.MemoActions])
	return r
}

// maxForeignTextBytes bounds a string read from Temporal that anyone with namespace access can
// set (a memo's trigger, a search attribute, a workflow ID or type), as the CLI keeps and
// prints it: longer than any target or workflow ID walkeeper makes.
const maxForeignTextBytes = 160

// foreignText is s, read from Temporal and settable by anyone with namespace access, as a
// table cell: clipped to maxForeignTextBytes, its control characters escaped.
func foreignText(s string) string {
	return contract.Printable(contract.Clip(s, maxForeignTextBytes))
}

// observedString decodes the first of the payloads (search attribute, then memo) that holds
// a non-empty string.
func observedString(ps ...*commonpb.Payload) *string {
	for _, p := range ps {
		var s string
		if p != nil && converter.GetDefaultDataConverter().FromPayload(p, &s) == nil && s != "" {
			return &s
		}
	}
	return nil
}

// observedInt decodes the first of the payloads that holds a number.
func observedInt(ps ...*commonpb.Payload) *int64 {
	for _, p := range ps {
		var v json.Number
		if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &v) != nil {
			continue
		}
		if n, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return &n
		}
		if f, err := v.Float64(); err == nil {
			return new(int64(f))
		}
	}
	return nil
}

// resultName is the status as the Web UI shows it ("Completed", "ContinuedAsNew", ...).
func resultName(s enumspb.WorkflowExecutionStatus) string {
	if s == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return "-"
	}
	return s.String()
}

func writeHistoryTable(out io.Writer, t store.Target, ns string, runs []historyRun, limit int) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintf(out, "No MergeWal or CompactBase runs of %s on record in namespace %s.\n", t, ns)
		return err
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tWORKFLOW\tTRIGGER\tPENDING AT START\tRECLAIMED\tACTIONS\tBYTES\tDURATION\tRESULT\tWEB UI")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Start.Local().Format(time.DateTime), r.Workflow, orDash(r.Trigger, contract.Printable),
			orDash(r.PendingAtStart, itoa), orDash(r.Reclaimed, itoa), orDash(r.Actions, itoa), orDash(r.BytesMerged, contract.FormatBytes),
			durationOf(r), r.Result, r.URL)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(runs) == limit {
		_, err := fmt.Fprintf(out, "(the newest %d runs; --limit N for more)\n", limit)
		return err
	}
	return nil
}

func durationOf(r historyRun) string {
	if r.DurationSec == nil {
		return "running " + time.Since(r.Start).Round(time.Second).String()
	}
	d := time.Duration(*r.DurationSec * float64(time.Second))
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// orDash is *p formatted, or "-" for a value a run does not carry.
func orDash[T any](p *T, format func(T) string) string {
	if p == nil {
		return "-"
	}
	return format(*p)
}

// uiLinks builds Temporal Web UI addresses.
type uiLinks struct {
	base, namespace string
}

// run is the page of one run: /namespaces/<ns>/workflows/<id>/<run>/history, the workflow
// ID path-escaped (it contains "/").
func (l uiLinks) run(workflowID, runID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history",
		strings.TrimRight(l.base, "/"), url.PathEscape(l.namespace), url.PathEscape(workflowID), url.PathEscape(runID))
}

// list is the workflow list filtered by a visibility query.
func (l uiLinks) list(query string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows?%s",
		strings.TrimRight(l.base, "/"), url.PathEscape(l.namespace), url.Values{"query": {query}}.Encode())
}
