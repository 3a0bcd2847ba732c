package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// maxResumableTargets bounds the heartbeat payload; past it a retry rescans from the start.
const maxResumableTargets = 5000

// DefaultScanConcurrency is how many stores' stats one ScanStats reads at once when the
// sweep does not say. Reading stats is a few storage round trips per store; one after
// another, 300 stores at 25 ms per request took ~30 s in the incident replay.
const DefaultScanConcurrency = contract.DefaultScanConcurrency

// ScanStats reads the stats of every store of one kind, at most p.Concurrency stores at once
// (DefaultScanConcurrency when 0, at most contract.MaxStoreConcurrency), heartbeating as stores complete. A store whose stats
// cannot be read (corrupt, vanished, unreachable) is reported with its error and does not
// fail the scan or delay the others beyond its own reads.
func (a *Activities) ScanStats(ctx context.Context, p contract.ScanStatsParams) (res contract.ScanStatsResult, err error) {
	start := time.Now()
	kind, err := store.ParseKind(p.Kind)
	defer func() { err = a.done(contract.ScanStatsActivity, kind, start, "ok", err) }()
	if err != nil {
		return res, err
	}
	if a.DB == nil {
		return res, errMisconfigured("activities have no store DB")
	}
	res.Kind = string(kind)
	limit := p.Concurrency
	if limit <= 0 {
		limit = DefaultScanConcurrency
	}
	limit = min(limit, contract.MaxStoreConcurrency) // the sweep input's bound, kept here too

	var prog contract.ScanProgress
	if activity.HasHeartbeatDetails(ctx) {
		if activity.GetHeartbeatDetails(ctx, &prog) != nil {
			prog = contract.ScanProgress{}
		}
	}
	stores, err := a.DB.List(ctx, kind)
	if err != nil {
		return res, err
	}
	var todo []store.Target
	for _, info := range stores {
		// Done by an earlier attempt (List is sorted by name within a kind).
		if prog.LastTarget == "" || info.Target.String() > prog.LastTarget {
			todo = append(todo, info.Target)
		}
	}
	// The reporter keeps heartbeating the last progress while slow stores are read.
	rep := a.startReporter(ctx, 0, false, prog)
	defer rep.finish(nil)
	now := a.now()
	scan := &scanState{prog: prog, stats: make([]contract.TargetStats, len(todo)), done: make([]bool, len(todo))}
	var g errgroup.Group
	g.SetLimit(limit)
	for i, t := range todo {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			ts := a.targetStats(ctx, t, now)
			if details, ok := scan.complete(i, todo, ts); ok {
				rep.progress(details)
			}
			return nil
		})
	}
	_ = g.Wait() // every Go returns nil: a store's error is in its TargetStats
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Targets = append(append(make([]contract.TargetStats, 0, len(prog.Targets)+len(todo)), prog.Targets...), scan.stats...)
	return res, nil
}

// scanState is the progress of one ScanStats. Stores complete out of order; the heartbeat
// carries the longest completed prefix (in target order), so a retry resumes after it.
type scanState struct {
	mu     sync.Mutex
	prog   contract.ScanProgress // REQUIRES: mu
	stats  []contract.TargetStats
	done   []bool // REQUIRES: mu
	prefix int    // stores [0, prefix) are done; REQUIRES: mu
}

// complete records store i and returns the new heartbeat details when the completed prefix
// grew.
func (s *scanState) complete(i int, todo []store.Target, ts contract.TargetStats) (contract.ScanProgress, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats[i] = ts
	s.done[i] = true
	grew := false
	for s.prefix < len(s.done) && s.done[s.prefix] {
		s.prog.LastTarget = todo[s.prefix].String()
		s.prog.Targets = append(s.prog.Targets, s.stats[s.prefix])
		s.prefix++
		grew = true
	}
	if !grew {
		return contract.ScanProgress{}, false
	}
	if len(s.prog.Targets) > maxResumableTargets {
		return contract.ScanProgress{}, true
	}
	// The reporter may heartbeat these details while later stores are appended: the capped
	// slice never sees those appends (they land beyond its length, or in a new array).
	n := len(s.prog.Targets)
	return contract.ScanProgress{LastTarget: s.prog.LastTarget, Targets: s.prog.Targets[:n:n]}, true
}

func (a *Activities) targetStats(ctx context.Context, t store.Target, now time.Time) contract.TargetStats {
	ts := contract.TargetStats{Target: t.String()}
	st, err := a.stats(ctx, t)
	if err != nil {
		ts.Error, ts.ErrorType = err.Error(), ErrorType(err)
		a.logger().Warn("store stats unavailable", zap.String("target", ts.Target), zap.Error(err))
		return ts
	}
	ts.Runs = st.Runs
	ts.Shards = len(st.Shards)
	ts.BaseVersion = st.BaseVersion
	var oldest time.Time
	for _, sh := range st.Shards {
		ts.Pending += sh.PendingGenerations
		if sh.PendingGenerations > 0 {
			ts.PendingShards++
		}
		ts.MaxShardPending = max(ts.MaxShardPending, sh.PendingGenerations)
		if sh.PendingGenerations > 0 && !sh.OldestPending.IsZero() && (oldest.IsZero() || sh.OldestPending.Before(oldest)) {
			oldest = sh.OldestPending
		}
	}
	if !oldest.IsZero() {
		ts.OldestPendingAge = max(now.Sub(oldest), 0)
	}
	return ts
}

func (a *Activities) stats(ctx context.Context, t store.Target) (store.Stats, error) {
	s, err := a.DB.Open(ctx, t)
	if err != nil {
		return store.Stats{}, err
	}
	return s.Stats(ctx)
}
