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

// MaxRunningMergesListed bounds the MergeWal runs of one kind that ScanDemand lists (10
// visibility pages, about 1 MiB of IDs); the starts of the rest attach as they would anyway.
const MaxRunningMergesListed = 10_000

// runningListTimeout bounds the visibility listing of one ScanDemand call; past it the scan
// keeps every candidate.
const runningListTimeout = 30 * time.Second

// runningMerges is the set of MergeWal IDs of kind that visibility lists as running, at most
// MaxRunningMergesListed, whose stores a sweep start would only attach to. Visibility lags a
// second or so, so a just-closed merge's store waits for the next round; a nil client or a
// failed listing returns nil (no filter), which costs actions, never rows.
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
