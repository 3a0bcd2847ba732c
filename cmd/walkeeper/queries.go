package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
)

// triggerValues are the WalTrigger values a MergeWal run of walkeeper's gets (sweep-runs
// starts CompactBase only), in the order `queries` lists them.
var triggerValues = []string{
	contract.TriggerCount, contract.TriggerSweepAge, contract.TriggerSweepCount,
	contract.TriggerHTTP, contract.TriggerCLI, contract.TriggerSchedule, contract.TriggerBackPressure,
}

func newQueriesCmd(g *globalOptions) *cobra.Command {
	var (
		ui         string
		slowerThan time.Duration
		behind     int
	)
	cmd := &cobra.Command{
		Use:   "queries [TARGET]",
		Short: "Print the Temporal visibility queries of useful saved views, with Web UI links",
		Long: `Print the visibility queries worth saving as views in Temporal Web: merges by store, by
trigger, the slowest, the failed ones, the stores that were far behind, what runs now, and the
sweep windows that started something.
Each comes with its Web UI link (paste the query into the search box of Workflows, then
"Save as New"). With TARGET (<kind>:<name>) every query is narrowed to that store.

Nothing is contacted: the command only prints. The links use --ui, else the running
'walkeeper dev''s Web UI, else ` + defaultUIURL + `.`,
		Example: `  walkeeper queries
  walkeeper queries generic:demo --slower-than 30s`,
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			t, err := parseOptionalTarget(a)
			if err != nil {
				return err
			}
			switch {
			case slowerThan <= 0:
				return cli.Usagef("--slower-than must be positive")
			case behind < 1: // else the "far behind" view lists every merge
				return cli.Usagef("--behind must be at least 1, got %d", behind)
			}
			st := g.devDefaults(cmd)
			links := uiLinks{base: uiBaseOrDev(ui, st), namespace: g.temporal.Namespace}
			return writeQueries(cmd.OutOrStdout(), savedViews(t, slowerThan, behind), links, cmp.Or(st.TemporalCLI, "temporal"), g.temporal.HostPort)
		},
	}
	registerUIFlag(cmd, &ui)
	cmd.Flags().DurationVar(&slowerThan, "slower-than", time.Minute, "what \"slow\" means for the slowest-runs view")
	cmd.Flags().IntVar(&behind, "behind", 100, "pending generations at start that make a store \"far behind\"")
	return cmd
}

// mergeWalRuns and mergesAndCompactions are the visibility filters of MergeWal runs, and of
// MergeWal and CompactBase runs.
var (
	mergeWalRuns         = fmt.Sprintf("WorkflowType=%q", contract.MergeWalWorkflow)
	mergesAndCompactions = fmt.Sprintf("(WorkflowType=%q OR WorkflowType=%q)", contract.MergeWalWorkflow, contract.CompactBaseWorkflow)
)

// savedView is one query worth saving in Temporal Web.
type savedView struct {
	name, query string
}

// savedViews lists the views, narrowed to t when it is set.
func savedViews(t *store.Target, slowerThan time.Duration, behind int) []savedView {
	var v []savedView
	scope, of := "", ""
	if t != nil {
		scope = fmt.Sprintf("%s=%q AND ", contract.WalTargetName, t.String())
		of = " of " + t.String()
		v = append(v, savedView{"merges and compactions" + of, scope + mergesAndCompactions})
	} else {
		v = append(v, savedView{"merges of one store (replace the target)",
			fmt.Sprintf("%s=%q AND %s", contract.WalTargetName, "generic:demo", mergeWalRuns)})
		v = append(v, savedView{"merges of one kind", fmt.Sprintf("%s=%q AND %s", contract.WalKindName, "generic", mergeWalRuns)})
	}
	for _, tr := range triggerValues {
		v = append(v, savedView{"merges" + of + " triggered by " + tr,
			fmt.Sprintf("%s%s AND %s=%q", scope, mergeWalRuns, contract.WalTriggerName, tr)})
	}
	v = append(v,
		savedView{fmt.Sprintf("the slowest: runs%s that took longer than %s", of, slowerThan),
			fmt.Sprintf("%s%s AND ExecutionDuration > %q", scope, mergesAndCompactions, slowerThan.String())},
		savedView{"the failed ones" + of,
			fmt.Sprintf(`%s%s AND (ExecutionStatus="Failed" OR ExecutionStatus="TimedOut" OR ExecutionStatus="Terminated")`, scope, mergesAndCompactions)},
		savedView{fmt.Sprintf("merges%s that started with more than %d pending generations", of, behind),
			fmt.Sprintf("%s%s AND %s > %d", scope, mergeWalRuns, contract.WalPendingAtStartName, behind)},
		savedView{"running now" + of, scope + runningQuery},
	)
	if t == nil {
		// The sweep's own runs: a window that started nothing is not worth a look.
		v = append(v, savedView{"sweep windows that started something (their current details and memo say which rounds, and why the rest was skipped)",
			fmt.Sprintf("WorkflowType=%q AND %s > 0", contract.SweepWindowWorkflow, contract.WalSweepStartsName)})
	}
	return v
}

func writeQueries(out io.Writer, views []savedView, links uiLinks, temporalCLI, hostPort string) error {
	fmt.Fprintf(out, "Saved views for Temporal Web (namespace %s): paste a query into the Workflows search box, then \"Save as New\".\n",
		links.namespace)
	for _, v := range views {
		fmt.Fprintf(out, "\n%s\n  %s\n  %s\n", v.name, v.query, links.list(v.query))
	}
	// savedViews always lists at least one view.
	fmt.Fprintf(out, "\nFrom a terminal, e.g.:\n  %s workflow list --address %s --namespace %s --query '%s'\n",
		temporalCLI, hostPort, links.namespace, strings.ReplaceAll(views[0].query, "'", `'\''`))
	_, err := fmt.Fprintln(out, "\nThe trigger, pending-at-start, reclaimed and bytes values of each run: walkeeper history TARGET")
	return err
}
