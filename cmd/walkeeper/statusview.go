package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/walkeeper/walkeeper/contract"
)

// printLiveStatus prints the answer of a running workflow's status query, completed with the
// server's pending activities (ApplyPending), as a block: phase and why it waits, then
// (MergeWal) one row per shard. tw holds the lines printed so far and is flushed here.
//
// REQUIRES: typ is MergeWal or CompactBase, the only types status queries.
func printLiveStatus(tw *tabwriter.Writer, out io.Writer, typ string, v converter.EncodedValue, pending []*workflowpb.PendingActivityInfo) error {
	var err error
	if typ == contract.MergeWalWorkflow {
		var st contract.MergeWalStatus
		if err = v.Get(&st); err == nil {
			st.ApplyPending(pending, time.Now())
			return printMergeStatus(tw, out, st)
		}
	} else {
		var st contract.CompactBaseStatus
		if err = v.Get(&st); err == nil {
			st.ApplyPending(pending, time.Now())
			fmt.Fprintf(tw, "  phase\t%s, pass %d\n", dash(st.Phase), st.Pass)
			fmt.Fprintf(tw, "  runs left\t%d\n", st.RunsLeft)
			printWaits(tw, st.Blocked, st.InFlight, st.RefusedSignals, st.IgnoredFields)
			return tw.Flush()
		}
	}
	fmt.Fprintf(tw, "  live status\tundecodable: %v\n", err)
	return tw.Flush()
}

func printMergeStatus(tw *tabwriter.Writer, out io.Writer, st contract.MergeWalStatus) error {
	phase := dash(st.Phase)
	if st.WorkflowRun > 1 {
		phase += fmt.Sprintf(" (workflow run %d of the continue-as-new chain)", st.WorkflowRun)
	}
	fmt.Fprintf(tw, "  phase\t%s\n", phase)
	if st.Shard != "" {
		fmt.Fprintf(tw, "  last step\tshard %s, pass %d\n", st.Shard, st.Pass)
	}
	fmt.Fprintf(tw, "  pending\t%d generations\n", st.Pending)
	fmt.Fprintf(tw, "  reclaimed\t%d generations so far\n", st.Reclaimed)
	printWaits(tw, st.Blocked, st.InFlight, st.RefusedSignals, st.IgnoredFields)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Shards) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	sw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(sw, "  SHARD\tPHASE\tPENDING\tPASSES\tRECLAIMED\tQUEUE\tWAITING ON / ERROR")
	for _, sh := range st.Shards {
		fmt.Fprintf(sw, "  %s\t%s\t%d\t%d\t%d\t%s\t%s\n", sh.Shard, dash(sh.Phase), sh.Pending, sh.Passes, sh.Reclaimed, dash(sh.Queue), cmp.Or(sh.Error, sh.Blocked, "-"))
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	if st.ShardsOmitted > 0 {
		// The query answer lists at most contract.MaxStatusShards shards; say how many it left out.
		fmt.Fprintf(out, "  (%d more shards not listed: the status lists at most %d, in flight and failed first)\n", st.ShardsOmitted, contract.MaxStatusShards)
	}
	return nil
}

// printWaits says what the run waits on: why it is blocked, the activities in flight one line
// each, how many activity-state signals it refused (someone other than walkeeper's
// activities signalled it) and the members of its input that no field took (a mistyped knob
// that ran at its default, decision 0722).
func printWaits(tw io.Writer, blocked string, acts []contract.InFlightActivity, refusedSignals int, ignored []string) {
	fmt.Fprintf(tw, "  blocked\t%s\n", dash(blocked))
	for i, a := range acts {
		key := ""
		if i == 0 {
			key = "in flight"
		}
		where := a.Queue
		if a.Shard != "" {
			where = "shard " + a.Shard + " on " + a.Queue
		}
		fmt.Fprintf(tw, "  %s\t%s (%s)\n", key, a.Activity, where)
	}
	if refusedSignals > 0 {
		fmt.Fprintf(tw, "  refused signals\t%d (payloads that did not decode; see the worker log)\n", refusedSignals)
	}
	if len(ignored) > 0 {
		quoted := make([]string, len(ignored))
		for i, n := range ignored {
			quoted[i] = strconv.Quote(n)
		}
		fmt.Fprintf(tw, "  ignored input\t%s (no such field: the run went on without them)\n", strings.Join(quoted, ", "))
	}
}

// dash is s, or "-" for an empty s.
func dash(s string) string { return cmp.Or(s, "-") }
