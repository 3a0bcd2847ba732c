package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The fleet scenario (docs/benchmarks/fleet.md): one MaintenanceSweep over a mem:// fleet with 1 %
// in debt, served by fleetWorkers in-process worker instances, every storage request paying the
// modelled latency.

const (
	fleetKind     = store.KindGeneric
	fleetWorkers  = 8
	fleetOldGens  = 2
	fleetHotGens  = 10
	fleetMergeMin = 8
	fleetMaxAge   = 10 * time.Minute
	fleetInterval = time.Minute
	listPageKeys  = 1000 // an object store's list page (S3 ListObjectsV2 MaxKeys)
)

// fleetSample is one sweep over one fleet.
type fleetSample struct {
	Stores, Debt int
	FixedDebt    bool         // the debt of the smallest fleet, not 1 % of this one
	Variant      fleetVariant // the start path's setting (--variants; zero = the build's defaults)
	Failed       string       // the reason the sweep did not finish ("" = it did)
	Duration     time.Duration
	Requests     int64 // discovery's storage requests, a listing billed one per 1000 keys
	ByOp         map[string]int64
	// OtherFleets counts the requests for an earlier fleet's stores (its terminated runs' activities).
	OtherFleets int64
	// LargestHeartbeat is the largest ScanDemand heartbeat; LargestPayload the largest payload the SDK
	// warned of (0 = none).
	LargestHeartbeat, LargestPayload int
	RSS                              rssSpan
	DiscoveryAlloc                   int64 // the bytes allocated up to the end of discovery (allocSampler)
	// TTM is the longest planting-to-start time; Started counts the debt's started MergeWal runs.
	TTM     time.Duration
	Started int
	// sweepHistory's actions also count each start, billed in the started run's history.
	sweepHistory
}

// startRate is the starts per second over the sweep's start span (0 without starts).
func (s fleetSample) startRate() float64 {
	if s.startSpan <= 0 {
		return 0
	}
	return float64(s.Started) / s.startSpan.Seconds()
}

func runFleet(ctx context.Context, o Options, res *Result) error {
	sizes, err := fleetSizes(o, "fleet", []int{10_000, 100_000}, 1)
	if err != nil {
		return err
	}
	variants, err := parseFleetVariants(o.FleetVariants)
	if err != nil {
		return err
	}
	latency := o.latency(10 * time.Millisecond)
	// A wait, not a target: 10,000 starts at the dev server's ≈ 20/s on 2 vCPUs take ~8 min.
	budget := fullOrQuick(o, 12*time.Minute, 5*time.Minute)
	res.params("sizes", sizes, "kind", fleetKind,
		"debt", "1% (half old: 2 generations sealed 1h ago; half hot: 10 generations)",
		"workers", fmt.Sprintf("%d in-process instances", fleetWorkers), "latency", latency,
		"max_starts", contract.DefaultSweepMaxStarts, "start_batch", contract.DefaultSweepStartBatch, "sweep_budget", budget)

	// The SDK logs its payload warnings through the client's logger.
	warn := &payloadWarnings{}
	o.Logger = zap.New(warn.wrap(o.logger().Core()))
	tenv, err := startTemporal(ctx, o, o.OutDir, devserver.Options{})
	if err != nil {
		return err
	}
	defer tenv.close()

	// Every size at 1 % debt, and the larger ones also at the smallest one's: "at the same debt".
	if len(o.FleetVariants) > 0 {
		res.params("variants (starts in flight per StartWorkflows / StartBatch)", variants)
	}
	fixed := debtOf(sizes[0])
	var samples []fleetSample
	seq := 0
	for _, n := range sizes {
		debts := []bool{false}
		if n != sizes[0] {
			debts = append(debts, true)
		}
		for _, fixedDebt := range debts {
			debt := debtOf(n)
			if fixedDebt {
				debt = fixed
			}
			for _, v := range variants {
				for rep := 0; rep < o.reps(); rep++ {
					seq++
					s, err := runFleetOnce(ctx, o, tenv, fleetRun{seq: seq, stores: n, debt: debt, variant: v, latency: latency, budget: budget, warn: warn})
					s.FixedDebt = fixedDebt
					if err != nil {
						return fmt.Errorf("fleet %d stores, %s: %w", n, v.name(), err)
					}
					o.progressf("fleet: %d stores, %d in debt, %s: %s", n, debt, v.name(), s.summary())
					samples = append(samples, s)
				}
			}
		}
	}
	fleetReport(res, o, sizes, samples)
	return nil
}

type fleetRun struct {
	seq     int
	stores  int
	debt    int
	variant fleetVariant
	latency time.Duration
	budget  time.Duration
	warn    *payloadWarnings
}

func (s fleetSample) summary() string {
	if s.Failed != "" {
		return fmt.Sprintf("FAILED (%s) after %s, %d requests", s.Failed, fmtDur(s.Duration), s.Requests)
	}
	return fmt.Sprintf("sweep %s, %d requests (%d of earlier fleets left out), largest event %d B, %d events (%d pages, %d batches of mean %s launched %s apart), RSS +%.0f MiB, %d/%d started (%.1f/s), time-to-merge %s",
		fmtDur(s.Duration), s.Requests, s.OtherFleets, s.largest, s.events, s.pages, s.batches, fmtDur(s.batchTime), fmtDur(s.launchGap), mib(s.RSS.growth()), s.Started, s.Debt, s.startRate(), fmtDur(s.TTM))
}

func runFleetOnce(ctx context.Context, o Options, tenv *temporalEnv, r fleetRun) (fleetSample, error) {
	s := fleetSample{Stores: r.stores, Variant: r.variant}
	in := contract.MaintenanceSweepInput{
		MergeMinGenerations: fleetMergeMin,
		MaxPendingAge:       fleetMaxAge,
		MaxStarts:           contract.DefaultSweepMaxStarts,
		// 10,000 starts in batches of 256, one a second: 40 s at the least.
		StartBatch: r.variant.batch(),
	}
	// mem:// keeps a sorted key index, so a listing page costs what an object store's does.
	url := memURL("fleet")
	raw, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return s, err
	}
	prefix := fmt.Sprintf("f%d-", r.seq)
	t0 := time.Now()
	if err := registerFleet(ctx, raw, prefix, r.stores); err != nil {
		return s, fmt.Errorf("register: %w", err)
	}
	o.progressf("fleet: registered %d stores in %s (%s)", r.stores, fmtDur(time.Since(t0)), r.variant.name())
	t0 = time.Now()
	planted, records, err := plantDebt(ctx, url, prefix, r.stores, r.debt, o)
	if err != nil {
		return s, fmt.Errorf("plant debt: %w", err)
	}
	s.Debt = len(planted)
	o.progressf("fleet: planted debt in %d stores (%d generations) in %s", len(planted), records, fmtDur(time.Since(t0)))

	hook := &fleetFaults{latency: r.latency, fleetPrefix: prefix, listKeys: map[string]int64{
		"_registry/" + string(fleetKind) + "/": int64(r.stores), "_demand/" + string(fleetKind) + "/": int64(records)}}
	warn := r.warn
	warn.largest.Store(0)
	var nodes []*node
	stopNodes := func() {
		for _, n := range nodes {
			n.stop(ctx)
			_ = n.db.Close(context.WithoutCancel(ctx))
		}
		nodes = nil
	}
	defer stopNodes()
	for i := 0; i < fleetWorkers; i++ {
		// Each worker has its own handle on the root (closing a DB closes its bucket).
		db, err := openLatencyDB(ctx, url, hook, storeOptions(fmt.Sprintf("%sw%d", prefix, i), o.logger().Named("store")))
		if err != nil {
			return s, fmt.Errorf("open worker %d's DB: %w", i, err)
		}
		n, err := startNode(ctx, tenv.client, db, nodeConfig{
			FlushInterval: time.Hour, MergeSlots: 4, SharedActivitySlots: 16,
			StartConcurrency: r.variant.Concurrency,
		}, o.logger())
		if err != nil {
			_ = db.Close(ctx)
			return s, fmt.Errorf("start worker %d: %w", i, err)
		}
		nodes = append(nodes, n)
	}

	// Wait until the previous fleet's leftover activities stop reaching these workers.
	if waited, n := hook.quiesce(ctx, 5*time.Second, 2*time.Minute); n > 0 {
		o.progressf("fleet: %d requests for earlier fleets' stores drained in %s before the sweep", n, fmtDur(waited))
	}

	// The sweep, after the freed heap goes back to the OS, so the growth is this sweep's.
	debug.FreeOSMemory()
	self := procRSS(os.Getpid())
	s.RSS.Before = self.resetPeak()
	hook.reset()
	allocs := startAllocSampler(50 * time.Millisecond)
	defer allocs.stop()
	start := time.Now()
	sweepID := fmt.Sprintf("fleet-sweep-%d-%d", time.Now().UnixNano(), r.seq)
	// USE_EXISTING: a start retried after a late answer attaches to the sweep it started.
	run, err := retried(ctx, func(ctx context.Context) (client.WorkflowRun, error) {
		return tenv.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sweepID, TaskQueue: contract.TaskQueue,
			Priority: contract.SweepPriority, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
			contract.MaintenanceSweepWorkflow, in)
	})
	if err != nil {
		return s, fmt.Errorf("start the sweep: %w", err)
	}
	s.Failed, s.LargestHeartbeat = watchSweep(ctx, tenv.client, sweepID, run.GetRunID(), r.budget)
	s.Duration = time.Since(start)
	s.RSS.Peak = self.peak()
	stopped := time.Now()
	if s.Failed != "" {
		_ = tenv.client.TerminateWorkflow(context.WithoutCancel(ctx), sweepID, run.GetRunID(), "fleet bench: "+s.Failed)
	} else {
		var out contract.MaintenanceSweepResult
		if err := run.Get(ctx, &out); err != nil {
			s.Failed = "failed: " + firstLine(err.Error())
		} else if len(out.ScanErrors) > 0 {
			// The sweep "succeeds" with the kind's scan failed: nothing of that kind starts.
			s.Failed = "failed: scan error " + firstLine(out.ScanErrors[0])
		}
	}
	h, err := historyOf(ctx, tenv.client, sweepID, run.GetRunID())
	if err != nil {
		return s, fmt.Errorf("the sweep's history: %w", err)
	}
	s.sweepHistory = h
	// Count every request until discovery ended (a failed sweep: until it was stopped), then only the
	// demand index's listings: the paged sweep lists later pages while its first starts run.
	until, indexUntil := h.discoveryEnd, h.lastDiscovery
	if until.IsZero() || s.Failed != "" {
		until, indexUntil = stopped, stopped
	}
	// A result gRPC refused never reaches the history: the SDK's payload warning names it.
	if big := warn.largest.Swap(0); big > 0 {
		s.LargestPayload = int(big)
		if s.Failed != "" && big > grpcMaxMessage {
			s.Failed = fmt.Sprintf("failed: a %.1f MB activity result exceeds gRPC's 4 MiB (the worker could not report it; %s)", float64(big)/1e6, strings.TrimPrefix(s.Failed, "failed: "))
		}
	}
	s.Requests, s.ByOp = hook.requests(time.Time{}, until, false)
	s.OtherFleets = hook.otherFleets()
	if later, _ := hook.requests(until, indexUntil, true); later > 0 {
		s.Requests += later
		s.ByOp[objstore.OpList] += later
	}
	s.DiscoveryAlloc = allocs.allocatedBy(until)
	allocs.stop()
	// A failed sweep may have started some merges before it stopped: count them too.
	wait := 30 * time.Second
	if s.Failed != "" {
		wait = 3 * time.Second
	}
	s.Started, s.TTM, err = timeToMerge(ctx, tenv.client, start, planted, wait)
	if err != nil {
		return s, fmt.Errorf("time to merge: %w", err)
	}
	s.actions += s.Started
	terminateMerges(ctx, tenv.client, start, prefix)
	stopNodes()
	// mem:// roots live as long as the process: the next fleet's memory must be its own.
	for _, p := range []string{"_registry/", string(fleetKind) + "/", "_demand/"} {
		objs, err := raw.List(ctx, p)
		if err != nil {
			continue
		}
		for _, ob := range objs {
			_ = raw.Delete(ctx, ob.Key)
		}
	}
	return s, nil
}
