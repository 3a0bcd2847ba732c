package main

import (
	"bytes"
	"testing"
	"text/tabwriter"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

func TestPrintMergeStatusTable(t *testing.T) {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	require.NoError(t, printMergeStatus(tw, &out, contract.MergeWalStatus{
		Target: "generic:demo", Phase: contract.PhaseMerging, Shard: "s1", Pass: 2, Pending: 5, Reclaimed: 7,
		Blocked: contract.BlockedBudget, WorkflowRun: 2, RefusedSignals: 2,
		Shards: []contract.ShardStatus{
			{Shard: "s1", Phase: contract.ShardPreparing, Pending: 3, Passes: 2, Reclaimed: 4, Queue: "walkeeper-shard-s1", Blocked: contract.BlockedBudget},
			{Shard: "s2", Phase: contract.ShardFailed, Pending: 2, Passes: 1, Reclaimed: 3, Error: "corrupt data: gen 9"},
		},
	}))
	assert.Equal(t, `  phase            merging (workflow run 2 of the continue-as-new chain)
  last step        shard s1, pass 2
  pending          5 generations
  reclaimed        7 generations so far
  blocked          waiting for budget
  refused signals  2 (payloads that did not decode; see the worker log)

  SHARD  PHASE      PENDING  PASSES  RECLAIMED  QUEUE               WAITING ON / ERROR
  s1     preparing  3        2       4          walkeeper-shard-s1  waiting for budget
  s2     failed     2        1       3          -                   corrupt data: gen 9
`, out.String())
}

func TestPrintMergeStatusSaysShardsOmitted(t *testing.T) {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	require.NoError(t, printMergeStatus(tw, &out, contract.MergeWalStatus{
		Target: "generic:demo", Phase: contract.PhaseMerging, WorkflowRun: 1, ShardsOmitted: 3968,
		Shards: []contract.ShardStatus{{Shard: "s1", Phase: contract.ShardPreparing, Pending: 3}},
	}))
	assert.Contains(t, out.String(), "  s1     preparing  3        0       0          -      -\n"+
		"  (3968 more shards not listed: the status lists at most 128, in flight and failed first)\n")
}

// The input members a run ignored (a mistyped knob, which ran at its default) are named,
// quoted, in both views; before, the status printed nothing of them.
func TestPrintStatusNamesIgnoredInputFields(t *testing.T) {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	require.NoError(t, printMergeStatus(tw, &out, contract.MergeWalStatus{Phase: contract.PhaseMerging, IgnoredFields: []string{"max_pases", "carry.shards[0].shardd"}}))
	assert.Contains(t, out.String(), "  ignored input  \"max_pases\", \"carry.shards[0].shardd\" (no such field: the run went on without them)\n")

	out.Reset()
	tw = tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	printWaits(tw, "", nil, 0, nil)
	require.NoError(t, tw.Flush())
	assert.Equal(t, "  blocked  -\n", out.String())
}
