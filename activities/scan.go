package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/workflows"
)

// ScanProgress is ScanStats' heartbeat detail: the stats gathered so far, in target order.
// A retried attempt resumes after LastTarget.
type ScanProgress struct {
	LastTarget string        `json:"last_target"`
	Targets    []TargetStats `json:"targets"`
}

// maxResumableTargets bounds the heartbeat payload; past it a retry rescans from the start.
const maxResumableTargets = 5000

// ScanStats reads the stats of every store of one kind, heartbeating after each store. A
// store whose stats cannot be read (corrupt, vanished, unreachable) is reported with its
// error and does not fail the scan.
func (a *Activities) ScanStats(ctx context.Context, p ScanStatsParams) (res ScanStatsResult, err error) {
	start := time.Now()
	kind, err := store.ParseKind(p.Kind)
	defer func() { err = a.done(workflows.ScanStatsActivity, kind, start, "ok", err) }()
	if err != nil {
		return res, err
	}
	if a.DB == nil {
		return res, errMisconfigured("activities have no store DB")
	}
	res.Kind = string(kind)

	var prog ScanProgress
	if activity.HasHeartbeatDetails(ctx) {
		if activity.GetHeartbeatDetails(ctx, &prog) != nil {
			prog = ScanProgress{}
		}
	}
	stores, err := a.DB.List(ctx, kind)
	if err != nil {
		return res, err
	}
	res.Targets = append(make([]TargetStats, 0, len(stores)), prog.Targets...)
	// The reporter keeps heartbeating the last progress while one slow store is read.
	rep := a.startReporter(ctx, 0, prog)
	defer rep.finish(nil)
	now := a.now()
	for _, info := range stores {
		name := info.Target.String()
		if prog.LastTarget != "" && name <= prog.LastTarget {
			continue // done by an earlier attempt (List is sorted by name within a kind)
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.Targets = append(res.Targets, a.targetStats(ctx, info.Target, now))
		prog.LastTarget = name
		if len(res.Targets) <= maxResumableTargets {
			rep.progress(ScanProgress{LastTarget: name, Targets: res.Targets})
		} else {
			rep.progress(ScanProgress{})
		}
	}
	return res, nil
}

func (a *Activities) targetStats(ctx context.Context, t store.Target, now time.Time) TargetStats {
	ts := TargetStats{Target: t.String()}
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
