package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/btree"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// The demand-driven sweep's scan and the background reconcile (docs/DESIGN.md §12).

// MaintenanceMetrics is implemented by a Metrics that also records the last successful
// fleet-wide run (the worker's Prometheus metrics do); RecordMaintenance uses it.
type MaintenanceMetrics interface {
	MaintenanceSucceeded(workflow string, at time.Time)
}

// ScanDemand lists kind's demand index as it streams and keeps the p.MaxCandidates most
// indebted stores over a threshold in a bounded set, reading no store; p.After pages on and
// p.AsOf fixes the clock. A store whose MergeWal is running is counted in Running instead
// (runningMerges) unless it also asks for compaction, since a start would only attach.
func (a *Activities) ScanDemand(ctx context.Context, p contract.ScanDemandParams) (res contract.ScanDemandResult, err error) {
	kind, err := store.ParseKind(p.Kind)
	defer a.done(contract.ScanDemandActivity, kind, time.Now(), "ok", &err)
	if err != nil {
		return res, err
	}
	if a.DB == nil {
		return res, errMisconfigured("activities have no store DB")
	}
	res.Kind = string(kind)
	k := min(max(p.MaxCandidates, 1), contract.MaxDemandCandidates)
	rep := a.startReporter(ctx, 0, contract.ScanDemandProgress{})
	defer rep.finish(nil)

	now := time.Now()
	if !p.AsOf.IsZero() {
		now = p.AsOf
	}
	// The candidates kept, most indebted first, so the bounded set evicts its last.
	top := btree.NewG(8, contract.DemandBefore)
	agg := &storeDemand{}
	// Listed at the first qualified store.
	running := sync.OnceValue(func() map[string]bool { return a.runningMerges(ctx, kind) })
	flush := func() {
		if agg.target == (store.Target{}) {
			return
		}
		t := agg.result(now)
		res.StoresWithDebt++
		if qualifies(t, p) && (p.After == nil || contract.DemandBefore(*p.After, t)) {
			res.Qualified++
			if running()[contract.MergeWalID(agg.target)] && !t.Compact {
				res.Running++
			} else {
				top.ReplaceOrInsert(t)
				if top.Len() > k {
					top.DeleteMax()
				}
			}
		}
		agg.reset(store.Target{})
		if res.StoresWithDebt%1024 == 0 {
			rep.progress(contract.ScanDemandProgress{Records: res.Records, Stores: res.StoresWithDebt})
		}
	}
	err = a.DB.WalkDemand(ctx, kind, func(r store.DemandRecord) error {
		res.Records++
		if r.Target != agg.target {
			flush()
			agg.reset(r.Target)
		}
		agg.add(r)
		return ctx.Err()
	})
	if err != nil {
		return res, err
	}
	flush()
	res.Targets = distinctTargets(top)
	if cut, err := fitPayload(&res); err != nil {
		return res, err
	} else if cut > 0 {
		a.logger().Warn("demand page cut to fit its payload; the sweep's next round lists on",
			zap.String("kind", res.Kind), zap.Int("kept", len(res.Targets)), zap.Int("cut", cut))
	}
	return res, guardPayload(contract.ScanDemandActivity, res)
}

// fitPayload drops res's least indebted targets until it encodes within MaxPayloadBytes and
// says how many went: MaxDemandCandidates stores with names near their 128-byte limit do not
// fit, and a short page ends the sweep's listing of the kind, so the stores cut are the next
// round's first.
func fitPayload(res *contract.ScanDemandResult) (cut int, err error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return 0, err
	}
	over := len(raw) - contract.MaxPayloadBytes
	for ; over > 0 && len(res.Targets) > 0; cut++ {
		t, err := json.Marshal(res.Targets[len(res.Targets)-1])
		if err != nil {
			return cut, err
		}
		over -= len(t) + 1 // and its comma, or the last one's: one byte to spare
		res.Targets = res.Targets[:len(res.Targets)-1]
	}
	return cut, nil
}

// qualifies reports whether t is over one of the sweep's thresholds.
func qualifies(t contract.DemandTarget, p contract.ScanDemandParams) bool {
	if t.Compact {
		return true
	}
	if t.Pending <= 0 {
		return false
	}
	if p.MergeMinGenerations > 0 && t.Pending >= p.MergeMinGenerations {
		return true
	}
	return p.MaxPendingAge > 0 && t.OldestPendingAge >= p.MaxPendingAge
}

// storeDemand aggregates one store's records as the listing streams them, in key order
// (objstore.Bucket.Walk): a shard's records are contiguous and sorted by generation, so a
// re-sealed generation's records are adjacent and a shard is complete when the next begins.
// It holds one shard's counters, never a set of generations.
type storeDemand struct {
	target  store.Target
	compact bool
	// shard is the shard being counted: gens distinct generations so far, the last one last.
	shard string
	gens  int
	last  uint64
	// pending, shards and maxShard count the shards before it.
	pending, shards, maxShard int
	bytes                     int64
	oldest                    time.Time
}

func (s *storeDemand) reset(target store.Target) { *s = storeDemand{target: target} }

func (s *storeDemand) add(r store.DemandRecord) {
	if r.Compact {
		s.compact = true
		return
	}
	if r.Shard != s.shard {
		s.pending, s.shards, s.maxShard = s.counts()
		s.shard, s.gens = r.Shard, 0
	}
	if s.gens > 0 && r.Gen == s.last {
		return
	}
	s.gens++
	s.last = r.Gen
	s.bytes += r.Bytes
	if s.oldest.IsZero() || r.SealedAt.Before(s.oldest) {
		s.oldest = r.SealedAt
	}
}

// counts returns the pending generations, the shards with any and the most in one shard,
// the shard being counted included.
func (s *storeDemand) counts() (pending, shards, maxShard int) {
	pending, shards, maxShard = s.pending, s.shards, s.maxShard
	if s.gens > 0 {
		pending, shards, maxShard = pending+s.gens, shards+1, max(maxShard, s.gens)
	}
	return pending, shards, maxShard
}

func (s *storeDemand) result(now time.Time) contract.DemandTarget {
	t := contract.DemandTarget{Target: s.target.String(), Compact: s.compact, PendingBytes: s.bytes}
	t.Pending, t.PendingShards, t.MaxShardPending = s.counts()
	if !s.oldest.IsZero() {
		t.OldestPendingAge = max(now.Sub(s.oldest), 0)
	}
	return t
}

// distinctTargets lists the candidates most indebted first. A store listed twice (a backend
// that broke contiguity) keeps its more indebted entry.
func distinctTargets(top *btree.BTreeG[contract.DemandTarget]) []contract.DemandTarget {
	kept := make([]contract.DemandTarget, 0, top.Len())
	seen := make(map[string]bool, top.Len())
	top.Ascend(func(t contract.DemandTarget) bool {
		if !seen[t.Target] {
			seen[t.Target] = true
			kept = append(kept, t)
		}
		return true
	})
	return kept
}

// ReconcilePage reconciles one page of kind's registry with the demand index, at most
// p.Concurrency stores at once; a store that cannot be read is reported and skipped, and only
// a failed listing fails the activity.
func (a *Activities) ReconcilePage(ctx context.Context, p contract.ReconcilePageParams) (res contract.ReconcilePageResult, err error) {
	kind, err := store.ParseKind(p.Kind)
	defer a.done(contract.ReconcilePageActivity, kind, time.Now(), "ok", &err)
	if err != nil {
		return res, err
	}
	if a.DB == nil {
		return res, errMisconfigured("activities have no store DB")
	}
	res.Kind = string(kind)
	limit := positiveOr(p.Limit, contract.DefaultReconcilePage, contract.MaxReconcilePage)
	// The reconcile input's bound, kept here too.
	conc := positiveOr(p.Concurrency, contract.DefaultReconcileConcurrency, contract.MaxStoreConcurrency)
	page, err := a.DB.ListStores(ctx, kind, p.After, limit)
	if err != nil {
		return res, err
	}
	rep := a.startReporter(ctx, 0, nil)
	defer rep.finish(nil)

	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(conc)
	for _, info := range page.Stores {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var r store.DemandCleanResult
			err := a.recovering("demand reconcile of a store", func() (err error) {
				r, err = a.DB.ReconcileStore(ctx, info.Target)
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			res.Counts.Add(contract.ReconcileCounts{Stores: 1, Missing: r.Missing, Covered: r.Covered, Orphans: r.Orphans})
			if err != nil && ctx.Err() == nil {
				res.Counts.Unreadable++
				if len(res.Problems) < contract.MaxReconcileUnreadable {
					res.Problems = append(res.Problems, storeProblem(info.Target.String(), err))
				}
				a.logger().Warn("demand reconcile skipped a store", zap.String("target", info.Target.String()), zap.Error(err))
			}
			return nil
		})
	}
	_ = g.Wait() // every Go returns nil: a store's error is in Problems
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Counts.Pages = 1
	res.Next = page.Next
	return res, guardPayload(contract.ReconcilePageActivity, res)
}

// RecordMaintenance records a successful fleet-wide run on this worker's metrics.
func (a *Activities) RecordMaintenance(ctx context.Context, p contract.RecordMaintenanceParams) error {
	if p.Workflow != contract.MaintenanceSweepName && p.Workflow != contract.ReconcileDemandName {
		err := temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown maintenance workflow %q", p.Workflow),
			contract.ErrTypeInvalidInput, nil)
		a.done(contract.RecordMaintenanceActivity, "", time.Now(), "ok", &err)
		return err
	}
	if m, ok := a.Metrics.(MaintenanceMetrics); ok {
		m.MaintenanceSucceeded(p.Workflow, time.Now())
	}
	activity.GetLogger(ctx).Info("maintenance run succeeded", "workflow", p.Workflow)
	return nil
}

// storeProblem is err as a reconcile page reports it for store t, its text cut so that its
// JSON takes at most MaxFailureTextBytes: MaxReconcileUnreadable of them fit a payload even
// when every byte of the text is escaped (a quoted XML error body).
func storeProblem(t string, err error) contract.StoreProblem {
	return contract.StoreProblem{Target: t, Error: contract.FailureTextJSON(err.Error()), ErrorType: ErrorType(err)}
}

// guardPayload refuses a result larger than contract.MaxPayloadBytes with a non-retryable
// error naming it: gRPC would refuse it at 4 MiB on every retry, for ever.
func guardPayload(activityName string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(raw) > contract.MaxPayloadBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s result is %d bytes, over the %d-byte payload limit", activityName, len(raw), contract.MaxPayloadBytes),
			contract.ErrTypePayloadTooLarge, nil)
	}
	return nil
}

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
