package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// MaxRunningMergesListed bounds the MergeWal runs of one kind that ScanDemand lists to leave
// their stores out of its candidates: 10 visibility pages and about 1 MiB of IDs. A kind with
// more running merges leaves the rest in, and their starts attach as they would anyway.
const MaxRunningMergesListed = 10_000

// runningListTimeout bounds the visibility listing of one ScanDemand call; past it the scan
// keeps every candidate.
const runningListTimeout = 30 * time.Second

// runningMerges is the set of MergeWal workflow IDs of kind that visibility lists as
// running, at most MaxRunningMergesListed of them. A sweep start of such a store would only
// attach to the run (the ID policy), at the cost of a StartWorkflows activity: a running
// merge already lists its store again before it ends. Visibility lags the server by up to a
// second or so: a merge that has just closed may still be listed, and its store waits for the
// next sweep round, as it would have after an attach to the closing run.
//
// A nil client or a failed listing returns nil (no filter): the sweep then starts those
// stores too and the starts attach to their running merges, which costs actions, never rows.
func (a *Activities) runningMerges(ctx context.Context, kind store.Kind) map[string]bool {
	if a.Client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, runningListTimeout)
	defer cancel()
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'",
		contract.MergeWalWorkflow, contract.WalKindName, kind)
	ids := map[string]bool{}
	var token []byte
	for len(ids) < MaxRunningMergesListed {
		resp, err := a.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: int32(min(contract.MaxDemandCandidates, MaxRunningMergesListed-len(ids))), NextPageToken: token, Query: query})
		if err != nil {
			a.logger().Warn("cannot list running merges; the sweep attaches to them instead",
				zap.String("kind", string(kind)), zap.Error(err))
			return nil
		}
		for _, e := range resp.GetExecutions() {
			ids[e.GetExecution().GetWorkflowId()] = true
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return ids
}
