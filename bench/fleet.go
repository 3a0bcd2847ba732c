package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/worker"
)

// The fleet benchmark (issue 11, "How to show it"): one MaintenanceSweep over a registered
// fleet of idle stores, 1 % of them in debt, measured for the design before the demand index
// (every store's stats read by one ScanStats per kind) and the demand-driven sweep, side by
// side in one run on one Temporal server.
//
// Setup per fleet size and design: a fresh mem:// root; the fleet registered by writing
// each store's `_registry/<kind>/<name>.json` and `<kind>/<name>/store.json` directly (the
// bytes DB.Create writes for a template store, with the name replaced), without latency;
// the debt planted through the store's own seal path by two writer processes that then
// "die" (their DBs are closed): half the indebted stores get fleetOldGens generations sealed
// an hour ago (older than MaxPendingAge, below the count threshold: only the time trigger
// finds them), half fleetHotGens fresh ones (over merge_min_generations). Then 8 walkeeper
// worker instances (in this process, each with its own instance ID, shard queue and store
// handle, wired as worker.Worker wires them) serve the sweep, every storage request paying
// the modelled object-store latency.

const (
	fleetKind     = store.KindGeneric
	fleetWorkers  = 8
	fleetOldGens  = 2
	fleetHotGens  = 10
	fleetMergeMin = 8
	fleetMaxAge   = 10 * time.Minute
	// fleetMaxStarts and fleetStartBatch are the sweep's defaults (the worker's too): 10,000
	// starts per sweep, enough for 1 % of a million stores, in batches of 256.
	fleetMaxStarts = contract.DefaultSweepMaxStarts
	fleetInterval  = time.Minute
	// fleetStartBatch and fleetScanConcurrency are the sweep knobs the bench sets.
	fleetStartBatch      = contract.DefaultSweepStartBatch
	fleetScanConcurrency = 128
	listPageKeys         = 1000 // an object store's list page (S3 ListObjectsV2 MaxKeys)
)

// fleetSample is one sweep of one design over one fleet.
type fleetSample struct {
	Stores, Debt int
	// FixedDebt: the debt of the smallest fleet, not 1 % of this one.
	FixedDebt bool
	Design    fleetDesign
	// Variant is the start path's setting (--variants; zero = the build's defaults).
	Variant fleetVariant
	// Failed is the reason the sweep did not finish ("" = it did).
	Failed   string
	Duration time.Duration
	// Requests are the storage requests of the sweep's discovery (list pages counted as an
	// object store bills them: one per 1000 keys).
	Requests int64
	ByOp     map[string]int64
	// OtherFleets counts the requests in the same window that named an earlier fleet's
	// stores (activities of its terminated MergeWal runs still dispatched to this fleet's
	// workers), left out of Requests.
	OtherFleets int64
	// LargestEvent is the largest event of the sweep's history (proto bytes: the largest
	// activity input/result/failure, workflow input/result); LargestHeartbeat the largest
	// heartbeat details seen while it ran.
	LargestEvent, LargestHeartbeat int
	// LargestPayload is the largest payload the SDK warned about uploading (> 512 KiB), 0 if
	// none.
	LargestPayload    int
	Events            int
	RSSStart, RSSPeak int64
	// DiscoveryAlloc is the bytes the process allocated from the sweep's start to the end of
	// its discovery (runtime/metrics /gc/heap/allocs:bytes): an upper bound on what any one
	// worker can hold for discovery, whatever the GC's pacing (see allocSampler).
	DiscoveryAlloc int64
	// TTM is the longest time from a store's debt being planted to its MergeWal start;
	// Merged counts the indebted stores whose MergeWal started, of Debt.
	TTM     time.Duration
	Started int
	Scanned int
	// Pages counts the sweep's ScanDemand (or ScanStats) activities. Batches counts its
	// StartWorkflows activities, BatchTime their mean time from start to close, and StartSpan
	// the time from the first one's start to the last one's close: Started / StartSpan is
	// the start rate the sweep got from Temporal.
	Pages, Batches int
	BatchTime      time.Duration
	StartSpan      time.Duration
	// LaunchGap is the mean time between two consecutive StartWorkflows launches (scheduled
	// events): StartSpacing when the cadence holds, more when workflow tasks run late.
	LaunchGap time.Duration
}

// startRate is the starts per second over the sweep's start span (0 without starts).
func (s fleetSample) startRate() float64 {
	if s.StartSpan <= 0 {
		return 0
	}
	return float64(s.Started) / s.StartSpan.Seconds()
}

func (s fleetSample) rssGrowth() int64 { return max(s.RSSPeak-s.RSSStart, 0) }

func (s fleetSample) side() fleetSide { return fleetSide{s.Design, s.Variant} }

// RunFleet is the fleet scenario.
func RunFleet(ctx context.Context, o Options) (*Result, error) {
	res := newResult("fleet", o)
	sizes, err := fleetSizes(o, "fleet", []int{10_000, 100_000}, 1)
	if err != nil {
		return nil, err
	}
	variants, err := parseFleetVariants(o.FleetVariants)
	if err != nil {
		return nil, err
	}
	latency := 10 * time.Millisecond
	if o.Latency < 0 {
		latency = 0
	} else if o.Latency > 0 {
		latency = o.Latency
	}
	// 10,000 starts at the dev server's ≈ 20 starts/s on this 2-vCPU machine take ~8 min.
	budget := 12 * time.Minute
	if o.Quick {
		budget = 40 * time.Second
	}
	res.param("sizes", fmt.Sprint(sizes))
	res.param("kind", fleetKind)
	res.param("debt", "1% (half old: 2 generations sealed 1h ago; half hot: 10 generations)")
	res.param("workers", fmt.Sprintf("%d in-process instances", fleetWorkers))
	res.param("latency", latency)
	res.param("max_starts", fleetMaxStarts)
	res.param("start_batch", fleetStartBatch)
	res.param("scan_concurrency", fleetScanConcurrency)
	res.param("sweep_budget", budget)

	// The SDK logs its payload warnings through the client's logger.
	warn := &payloadWarnings{}
	o.Logger = zap.New(warn.wrap(o.logger().Core()))
	tenv, err := startTemporal(ctx, o, o.OutDir)
	if err != nil {
		return nil, err
	}
	defer tenv.close()

	// Every size at 1 % debt; every larger size also at the smallest size's debt, for the
	// issue's ratio "at the same debt".
	designs := fleetDesigns
	if len(o.FleetDesigns) > 0 {
		designs = nil
		for _, d := range o.FleetDesigns {
			if !slices.Contains(fleetDesigns, fleetDesign(d)) {
				return nil, fmt.Errorf("fleet: unknown design %q (want scan or demand)", d)
			}
			designs = append(designs, fleetDesign(d))
		}
	}
	res.param("designs", fmt.Sprint(designs))
	if len(o.FleetVariants) > 0 {
		res.param("variants (starts in flight per StartWorkflows / StartBatch / pacing)", fmt.Sprint(variants))
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
			for _, d := range designs {
				for _, v := range variants {
					side := fleetSide{d, v}
					for rep := 0; rep < o.reps(); rep++ {
						seq++
						s, err := runFleetOnce(ctx, o, tenv, fleetRun{seq: seq, stores: n, debt: debt, design: d, variant: v, latency: latency, budget: budget, warn: warn})
						s.FixedDebt = fixedDebt
						if errors.Is(err, errDesignUnavailable) {
							o.progressf("fleet: %d stores, %s: not run (%v)", n, side.name(), err)
							samples = append(samples, fleetSample{Stores: n, Debt: debt, FixedDebt: fixedDebt, Design: d, Variant: v, Failed: "not run: " + err.Error()})
							break
						}
						if err != nil {
							return nil, fmt.Errorf("fleet %d stores, %s: %w", n, side.name(), err)
						}
						o.progressf("fleet: %d stores, %d in debt, %s: %s", n, debt, side.name(), s.summary())
						samples = append(samples, s)
					}
				}
			}
		}
	}
	fleetReport(res, o, sizes, samples)
	return res, nil
}

// fleetRun is one fleet's parameters.
type fleetRun struct {
	seq     int
	stores  int
	debt    int
	design  fleetDesign
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
		fmtDur(s.Duration), s.Requests, s.OtherFleets, s.LargestEvent, s.Events, s.Pages, s.Batches, fmtDur(s.BatchTime), fmtDur(s.LaunchGap), mib(s.rssGrowth()), s.Started, s.Debt, s.startRate(), fmtDur(s.TTM))
}

func runFleetOnce(ctx context.Context, o Options, tenv *temporalEnv, r fleetRun) (fleetSample, error) {
	s := fleetSample{Stores: r.stores, Design: r.design, Variant: r.variant}
	in, err := sweepInputFor(r.design, contract.MaintenanceSweepInput{
		MergeMinGenerations: fleetMergeMin,
		MaxPendingAge:       fleetMaxAge,
		MaxStarts:           fleetMaxStarts,
		// 10,000 starts in batches of 256 (the default variant), one batch a second: 40 s
		// at the least; the variant's pacing ("" = the workflow's default).
		StartBatch:  r.variant.batch(),
		StartPacing: r.variant.Pacing,
		// The scan at its best: 128 stores' stats read at once instead of 8.
		ScanConcurrency: fleetScanConcurrency,
	})
	if err != nil {
		return s, err
	}
	// mem:// keeps a sorted key index (store/objstore/mem.go), so a listing page costs what an
	// object store's does, not a sort of the whole fleet (gocloud's memblob did that).
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
	o.progressf("fleet: registered %d stores in %s (%s)", r.stores, fmtDur(time.Since(t0)), r.design)
	t0 = time.Now()
	planted, records, err := plantDebt(ctx, url, prefix, r.stores, r.debt, o)
	if err != nil {
		return s, fmt.Errorf("plant debt: %w", err)
	}
	s.Debt = len(planted)
	o.progressf("fleet: planted debt in %d stores (%d generations) in %s", len(planted), records, fmtDur(time.Since(t0)))

	hook := &fleetFaults{latency: r.latency, fleetPrefix: prefix, registryPrefix: "_registry/" + string(fleetKind) + "/", registryKeys: int64(r.stores),
		demandPrefix: "_demand/" + string(fleetKind) + "/", demandKeys: int64(records)}
	warn := r.warn
	warn.largest.Store(0)
	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop(ctx)
			_ = n.db.Close(context.WithoutCancel(ctx))
		}
	}()
	for i := 0; i < fleetWorkers; i++ {
		// Each worker has its own handle on the root (closing a DB closes its bucket).
		db, err := openLatencyDB(ctx, url, hook, storeOptions(fmt.Sprintf("%sw%d", prefix, i), o.logger().Named("store")))
		if err != nil {
			return s, err
		}
		n, err := startNode(ctx, tenv.client, db, worker.NewMetrics(db.Options().Budget), nodeConfig{
			FlushInterval: time.Hour, MergeSlots: 4, SharedActivitySlots: 16,
			StartConcurrency: r.variant.Concurrency, EagerStart: r.variant.Eager,
		}, o.logger())
		if err != nil {
			_ = db.Close(ctx)
			return s, err
		}
		nodes = append(nodes, n)
	}

	// The previous fleet's leftover activities first: wait until they stop reaching these
	// workers (runs 7 and 9 counted up to 151 of their requests in a later sweep).
	if waited, n := hook.quiesce(ctx, 5*time.Second, 2*time.Minute); n > 0 {
		o.progressf("fleet: %d requests for earlier fleets' stores drained in %s before the sweep", n, fmtDur(waited))
	}

	// The sweep.
	// Hand the previous fleet's freed heap back to the OS first, so the growth is this
	// sweep's and not hidden by memory the runtime still holds.
	debug.FreeOSMemory()
	resetPeakRSS()
	s.RSSStart = procStatus("VmRSS")
	hook.reset()
	allocs := startAllocSampler(50 * time.Millisecond)
	defer allocs.stop()
	start := time.Now()
	sweepID := fmt.Sprintf("fleet-sweep-%d-%d", time.Now().UnixNano(), r.seq)
	run, err := tenv.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sweepID, TaskQueue: contract.TaskQueue, Priority: contract.SweepPriority},
		contract.MaintenanceSweepWorkflow, in)
	if err != nil {
		return s, err
	}
	w := watchSweep(ctx, tenv.client, sweepID, run.GetRunID(), r.budget)
	s.Duration = time.Since(start)
	s.Failed, s.LargestHeartbeat = w.failed, w.heartbeat
	s.RSSPeak = procStatus("VmHWM")
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
		s.Scanned = out.Scanned
	}
	h, err := historyOf(ctx, tenv.client, sweepID, run.GetRunID())
	if err != nil {
		return s, err
	}
	s.Events, s.LargestEvent = h.events, h.largest
	s.Pages, s.Batches, s.BatchTime, s.StartSpan, s.LaunchGap = h.pages, h.batches, h.batchTime, h.startSpan, h.launchGap
	// Count up to the end of discovery (a failed sweep: up to when it was stopped): every
	// request until the first start, then only the listings of the demand index (the paged
	// sweep lists its later pages while its first starts run; the MergeWal runs they start
	// are not the sweep's).
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
	s.Requests, s.ByOp = hook.countBefore(until)
	s.OtherFleets = hook.otherFleets()
	if later := hook.indexListsBetween(until, indexUntil); later > 0 {
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
		return s, err
	}
	terminateMerges(ctx, tenv.client, start, prefix)
	for _, n := range nodes {
		n.stop(ctx)
		_ = n.db.Close(context.WithoutCancel(ctx))
	}
	nodes = nil
	// mem:// roots live as long as the process: drop this fleet's objects so the next
	// fleet's memory is its own.
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

// registerFleet writes n stores' registry entry and store.json straight into the bucket:
// the bytes DB.Create writes (docs/FORMAT.md §1), taken from a template store created in a
// scratch bucket, with the template's name replaced. 1M stores take seconds this way; DB.Create
// would also keep every store resident in the creating DB.
func registerFleet(ctx context.Context, b *objstore.Bucket, prefix string, n int) error {
	const tmplName = "fleet-template-name"
	tdb, err := store.OpenDB(ctx, memURL("fleet-template"), storeOptions("fleet-template", nil))
	if err != nil {
		return err
	}
	t := store.Target{Kind: fleetKind, Name: tmplName}
	if _, err := createGeneric(ctx, tdb, tmplName); err != nil {
		return err
	}
	tb := tdb.Bucket()
	reg, err := tb.Get(ctx, "_registry/"+string(fleetKind)+"/"+tmplName+".json")
	if err != nil {
		return err
	}
	meta, err := tb.Get(ctx, t.Path()+"/store.json")
	if err != nil {
		return err
	}
	_ = tdb.Close(ctx)
	quoted := []byte(`"` + tmplName + `"`)
	if bytes.Count(reg, quoted) != 1 || bytes.Count(meta, quoted) != 1 {
		return fmt.Errorf("template store's objects name it %d and %d times, want once each", bytes.Count(reg, quoted), bytes.Count(meta, quoted))
	}
	var g errgroup.Group
	g.SetLimit(16) // file:// (fleet-worker) waits on the file system, not the CPU
	const chunk = 10_000
	for lo := 0; lo < n; lo += chunk {
		g.Go(func() error {
			for i := lo; i < min(lo+chunk, n); i++ {
				name := fleetName(prefix, i)
				q := []byte(`"` + name + `"`)
				if err := b.Put(ctx, "_registry/"+string(fleetKind)+"/"+name+".json", bytes.Replace(reg, quoted, q, 1)); err != nil {
					return err
				}
				if err := b.Put(ctx, string(fleetKind)+"/"+name+"/store.json", bytes.Replace(meta, quoted, q, 1)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// fleetSizes is o.FleetSizes, or full (2k and 20k with Quick), each checked to lie in
// [least, 10M].
func fleetSizes(o Options, scenario string, full []int, least int) ([]int, error) {
	sizes := o.FleetSizes
	if len(sizes) == 0 {
		sizes = full
		if o.Quick {
			sizes = []int{2_000, 20_000}
		}
	}
	for _, n := range sizes {
		if n < least || n > 10_000_000 {
			return nil, fmt.Errorf("%s: size %d out of range [%d, 10000000]", scenario, n, least)
		}
	}
	return sizes, nil
}

func fleetName(prefix string, i int) string { return fmt.Sprintf("%s%07d", prefix, i) }

func debtOf(n int) int { return max(n/100, 1) }

// plantDebt seals generations in debt of the n stores (spread evenly), through two writers that
// are closed afterwards: the even ones get fleetOldGens generations sealed an hour ago, the
// odd ones fleetHotGens fresh ones. It returns when each store's last seal returned, and the
// number of generations sealed.
func plantDebt(ctx context.Context, url, prefix string, n, debt int, o Options) (map[store.Target]time.Time, int, error) {
	old, err := store.OpenDB(ctx, url, storeOptions(prefix+"writer-old", o.logger().Named("store"), func(so *store.Options) {
		so.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	}))
	if err != nil {
		return nil, 0, err
	}
	hot, err := store.OpenDB(ctx, url, storeOptions(prefix+"writer-hot", o.logger().Named("store")))
	if err != nil {
		_ = old.Close(ctx)
		return nil, 0, err
	}
	defer func() {
		_ = old.Close(context.WithoutCancel(ctx))
		_ = hot.Close(context.WithoutCancel(ctx))
	}()
	var mu sync.Mutex
	planted := make(map[store.Target]time.Time, debt)
	var gens atomic.Int64
	var g errgroup.Group
	g.SetLimit(8)
	for j := 0; j < debt; j++ {
		g.Go(func() error {
			db, k := old, fleetOldGens
			if j%2 == 1 {
				db, k = hot, fleetHotGens
			}
			t := store.Target{Kind: fleetKind, Name: fleetName(prefix, j*(n/debt))}
			st, err := db.Open(ctx, t)
			if err != nil {
				return err
			}
			if err := writeGenerations(ctx, st, k, 1, 64, 1, int64(j)); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			gens.Add(int64(k))
			mu.Lock()
			planted[t] = time.Now()
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return planted, int(gens.Load()), nil
}

// fleetFaults models the object store for the workers: every request pays latency and is
// counted by operation. A listing of the registry or of the demand index is counted, and
// slept, as the pages an object store would serve (one per listPageKeys keys; mem:// lists
// in one call): the bench knows how many keys each holds.
type fleetFaults struct {
	latency time.Duration
	// fleetPrefix starts the names of this fleet's stores ("f3-"): a request for a store of
	// an earlier fleet (f1-..., f2-...) is one of its terminated MergeWal runs' activities
	// that still reached this fleet's workers, and is counted apart (other), not as the
	// sweep's.
	fleetPrefix    string
	registryPrefix string
	registryKeys   int64
	demandPrefix   string
	demandKeys     int64

	mu    sync.Mutex
	since time.Time                  // REQUIRES: mu
	byMs  map[int64]map[string]int64 // REQUIRES: mu; requests per op, per millisecond since `since`
	// indexByMs counts the listings of a kind's demand index (`_demand/<kind>/`: ScanDemand's),
	// per millisecond since `since`. REQUIRES: mu.
	indexByMs map[int64]int64
	other     int64 // REQUIRES: mu
}

// ofOtherFleet says whether key names a store of another fleet than prefix's: a path
// segment shaped like a fleet store's name ("f<seq>-...") that does not start with prefix.
func ofOtherFleet(key, prefix string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		i := 1
		for i < len(seg) && seg[i] >= '0' && seg[i] <= '9' {
			i++
		}
		if len(seg) > 2 && seg[0] == 'f' && i > 1 && i < len(seg) && seg[i] == '-' && !strings.HasPrefix(seg, prefix) {
			return true
		}
	}
	return false
}

// quiesce waits until no request for another fleet's stores came for quiet (the activities
// of the previous fleet's terminated MergeWal runs that still reach this fleet's workers have
// drained: they would run during this fleet's sweep, in its allocations and CPU), at most
// limit. It returns how long it waited and how many such requests it saw.
func (f *fleetFaults) quiesce(ctx context.Context, quiet, limit time.Duration) (time.Duration, int64) {
	start := time.Now()
	last, lastChange := f.otherFleets(), time.Now()
	for time.Since(lastChange) < quiet && time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), f.otherFleets()
		case <-time.After(250 * time.Millisecond):
		}
		if n := f.otherFleets(); n != last {
			last, lastChange = n, time.Now()
		}
	}
	return time.Since(start), last
}

// otherFleets returns the requests for other fleets' stores since reset (before the first
// reset: since the hook was made).
func (f *fleetFaults) otherFleets() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.other
}

// isIndexListing says whether a listing of key is a ScanDemand page: the whole demand index
// of a kind, not one store's records.
func isIndexListing(op, key string) bool {
	return op == objstore.OpList && strings.HasPrefix(key, "_demand/") && strings.Count(key, "/") == 2 && strings.HasSuffix(key, "/")
}

func (f *fleetFaults) Before(op, key string) error {
	pages := int64(1)
	if op == objstore.OpList {
		switch key {
		case f.registryPrefix:
			pages = max(1, (f.registryKeys+listPageKeys-1)/listPageKeys)
		case f.demandPrefix:
			pages = max(1, (f.demandKeys+listPageKeys-1)/listPageKeys)
		}
	}
	f.mu.Lock()
	if f.fleetPrefix != "" && ofOtherFleet(key, f.fleetPrefix) {
		f.other += pages
	} else if f.byMs != nil {
		ms := time.Since(f.since).Milliseconds()
		m := f.byMs[ms]
		if m == nil {
			m = map[string]int64{}
			f.byMs[ms] = m
		}
		m[op] += pages
		if isIndexListing(op, key) {
			f.indexByMs[ms] += pages
		}
	}
	f.mu.Unlock()
	if f.latency > 0 {
		time.Sleep(time.Duration(pages) * f.latency)
	}
	return nil
}

func (f *fleetFaults) After(op, key string, err error) error { return err }

// reset starts counting from now.
func (f *fleetFaults) reset() {
	f.mu.Lock()
	f.since, f.byMs, f.indexByMs, f.other = time.Now(), map[int64]map[string]int64{}, map[int64]int64{}, 0
	f.mu.Unlock()
}

// indexListsBetween returns the demand-index listing requests issued in [from, until).
func (f *fleetFaults) indexListsBetween(from, until time.Time) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for ms, v := range f.indexByMs {
		at := f.since.Add(time.Duration(ms) * time.Millisecond)
		if !at.Before(from) && at.Before(until) {
			n += v
		}
	}
	return n
}

// countBefore returns the requests issued before `until` (zero = all so far), by operation.
func (f *fleetFaults) countBefore(until time.Time) (int64, map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total int64
	out := map[string]int64{}
	for ms, m := range f.byMs {
		if !until.IsZero() && !f.since.Add(time.Duration(ms)*time.Millisecond).Before(until) {
			continue
		}
		for op, v := range m {
			out[op] += v
			total += v
		}
	}
	return total, out
}

// sweepWatch is what watchSweep saw.
type sweepWatch struct {
	failed    string
	heartbeat int
}

// watchSweep polls the sweep until it closes, its discovery activity fails an attempt, or
// the budget runs out, and keeps the largest heartbeat details of its discovery activities.
func watchSweep(ctx context.Context, c client.Client, id, runID string, budget time.Duration) sweepWatch {
	var w sweepWatch
	deadline := time.Now().Add(budget)
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			w.failed = "describe: " + firstLine(err.Error())
			return w
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return w
		}
		for _, pa := range d.GetPendingActivities() {
			if !discoveryActivities[pa.GetActivityType().GetName()] {
				continue
			}
			w.heartbeat = max(w.heartbeat, proto.Size(pa.GetHeartbeatDetails()))
			if pa.GetAttempt() > 1 && pa.GetLastFailure() != nil {
				w.failed = fmt.Sprintf("failed: %s attempt %d: %s", pa.GetActivityType().GetName(), pa.GetAttempt()-1, firstLine(pa.GetLastFailure().GetMessage()))
				return w
			}
		}
		if time.Now().After(deadline) {
			w.failed = fmt.Sprintf("failed: not finished within %s", budget)
			return w
		}
		select {
		case <-ctx.Done():
			w.failed = ctx.Err().Error()
			return w
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sweepHistory is what a sweep's history shows.
type sweepHistory struct {
	events, largest int
	// pages counts the discovery activities, batches the StartWorkflows ones (closed),
	// batchTime their mean start-to-close time and startSpan the first one's start to the
	// last one's close.
	pages, batches int
	batchTime      time.Duration
	startSpan      time.Duration
	launchGap      time.Duration
	// lastDiscovery is when the last discovery activity closed.
	lastDiscovery time.Time
	// discoveryEnd is when discovery ended: the last discovery activity closed, or the first
	// StartWorkflows started if that was earlier (no MergeWal exists before it). Zero if
	// neither happened.
	discoveryEnd time.Time
}

// historyOf reads a workflow run's history: its events, the size of the largest, and when
// discovery ended.
func historyOf(ctx context.Context, c client.Client, id, runID string) (sweepHistory, error) {
	var h sweepHistory
	types := map[int64]string{}
	var lastDiscovery, firstStart, lastStartEnd, firstLaunch, lastLaunch time.Time
	launches := 0
	started := map[int64]time.Time{} // StartWorkflows: scheduled event ID -> started
	var batchTotal time.Duration
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, err
		}
		h.events++
		h.largest = max(h.largest, proto.Size(ev))
		at := ev.GetEventTime().AsTime()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == contract.StartWorkflowsActivity {
				if launches == 0 {
					firstLaunch = at
				}
				lastLaunch = at
				launches++
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && types[a.GetScheduledEventId()] == contract.StartWorkflowsActivity {
			started[a.GetScheduledEventId()] = at
			if firstStart.IsZero() {
				firstStart = at
			}
		}
		var sched int64
		switch {
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			sched = ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			sched = ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			sched = ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
		}
		if sched != 0 && discoveryActivities[types[sched]] {
			lastDiscovery = at
			h.pages++
		}
		if sched != 0 && types[sched] == contract.StartWorkflowsActivity {
			h.batches++
			batchTotal += at.Sub(started[sched])
			lastStartEnd = at
		}
	}
	if h.batches > 0 {
		h.batchTime = batchTotal / time.Duration(h.batches)
		h.startSpan = lastStartEnd.Sub(firstStart)
	}
	if launches > 1 {
		h.launchGap = lastLaunch.Sub(firstLaunch) / time.Duration(launches-1)
	}
	h.lastDiscovery = lastDiscovery
	h.discoveryEnd = lastDiscovery
	if !firstStart.IsZero() && (h.discoveryEnd.IsZero() || firstStart.Before(h.discoveryEnd)) {
		h.discoveryEnd = firstStart
	}
	return h, nil
}

// timeToMerge waits (up to wait, visibility is eventually consistent) for every planted
// store's MergeWal start to be visible and returns how many were, and the longest time from a
// store's planting (or the sweep's start, if later) to its MergeWal's start.
func timeToMerge(ctx context.Context, c client.Client, since time.Time, planted map[store.Target]time.Time, wait time.Duration) (int, time.Duration, error) {
	deadline := time.Now().Add(wait)
	for {
		starts := map[string]time.Time{}
		var token []byte
		for {
			resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query:         fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", contract.MergeWalWorkflow, since.UTC().Format(time.RFC3339Nano)),
				NextPageToken: token,
			})
			if err != nil {
				return 0, 0, err
			}
			for _, e := range resp.GetExecutions() {
				starts[e.GetExecution().GetWorkflowId()] = e.GetStartTime().AsTime()
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		n, worst := 0, time.Duration(0)
		for t, at := range planted {
			if st, ok := starts[contract.MergeWalID(t)]; ok {
				n++
				// From the later of its planting and the sweep's start: planting 10,000 stores'
				// debt takes minutes at 1M stores, and a store cannot be started by a sweep that
				// has not begun; a schedule adds its phase, up to one interval.
				from := at
				if since.After(from) {
					from = since
				}
				worst = max(worst, st.Sub(from))
			}
		}
		if n == len(planted) || time.Now().After(deadline) {
			return n, worst, nil
		}
		time.Sleep(time.Second)
	}
}

// terminateMerges ends the MergeWal runs this fleet's sweep started, so the next fleet's
// sweep is measured alone.
func terminateMerges(ctx context.Context, c client.Client, since time.Time, prefix string) {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND StartTime >= '%s'", contract.MergeWalWorkflow, since.UTC().Format(time.RFC3339Nano)),
			NextPageToken: token,
		})
		if err != nil {
			return
		}
		// Up to 32 at once: one at a time, the 10,000 merges of a 1M-store fleet took
		// longer to terminate than to start.
		var g errgroup.Group
		g.SetLimit(32)
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetWorkflowId(); strings.Contains(id, "/"+prefix) {
				g.Go(func() error {
					_ = c.TerminateWorkflow(context.WithoutCancel(ctx), id, e.GetExecution().GetRunId(), "fleet bench: next fleet")
					return nil
				})
			}
		}
		_ = g.Wait()
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return
		}
	}
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux ≥ 4.0: writing 5 to
// /proc/self/clear_refs), so the next VmHWM read is the peak since now.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0o644) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// fleetKey names one cell of the report: a design at a fleet size, at 1 % debt or at the
// smallest fleet's debt.
type fleetKey struct {
	side   fleetSide
	stores int
	fixed  bool
}

func (k fleetKey) valuePrefix() string {
	if k.fixed {
		return fmt.Sprintf("%s_%d_fixed_", k.side.valueName(), k.stores)
	}
	return fmt.Sprintf("%s_%d_", k.side.valueName(), k.stores)
}

// fleetReport fills res from the samples: a table per design, values, targets and plots.
func fleetReport(res *Result, o Options, sizes []int, samples []fleetSample) {
	aggs := map[fleetKey]*fleetAgg{}
	var order []fleetKey
	var sides []fleetSide // in the order measured: design, then variant
	for _, s := range samples {
		if !slices.Contains(sides, s.side()) {
			sides = append(sides, s.side())
		}
		k := fleetKey{s.side(), s.Stores, s.FixedDebt}
		a := aggs[k]
		if a == nil {
			a = &fleetAgg{}
			aggs[k] = a
			order = append(order, k)
		}
		a.add(s)
	}
	for _, a := range aggs {
		a.finish()
	}
	for _, d := range sides {
		t := Table{
			Title: fmt.Sprintf("Design %q: one sweep per fleet, median over repetitions", d.name()),
			Header: []string{"stores", "in debt", "outcome", "sweep", "storage requests", "by operation", "largest event (B)",
				"largest heartbeat (B)", "history events", "pages / start batches (mean batch, launch gap)", "allocated in discovery (MiB)", "RSS growth (MiB)", "MergeWal started", "starts/s", "time-to-merge (max)"},
		}
		for _, k := range order {
			if k.side != d {
				continue
			}
			a := aggs[k]
			key := k.valuePrefix()
			debt := fmt.Sprintf("%d (1%%)", a.debt)
			if k.fixed {
				debt = fmt.Sprintf("%d (as at %d)", a.debt, sizes[0])
			}
			outcome := "finished"
			res.Values[key+"failed"] = 0
			if a.failed != "" {
				outcome = a.failed
				res.Values[key+"failed"] = 1
			}
			if a.notRun() {
				t.Rows = append(t.Rows, []string{fmt.Sprint(k.stores), debt, outcome, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"})
				continue
			}
			res.Values[key+"sweep_s"] = a.dur.Median
			res.Values[key+"requests"] = a.req.Median
			res.Values[key+"largest_event_bytes"] = a.ev.Median
			res.Values[key+"largest_heartbeat_bytes"] = a.hb
			res.Values[key+"history_events"] = a.events.Median
			res.Values[key+"rss_growth_mib"] = a.rss.Median
			res.Values[key+"discovery_alloc_mib"] = a.alloc.Median
			res.Values[key+"debt"] = float64(a.debt)
			res.Values[key+"pages"] = float64(a.last.Pages)
			res.Values[key+"start_batches"] = float64(a.last.Batches)
			res.Values[key+"start_rate"] = a.last.startRate()
			res.Values[key+"launch_gap_s"] = a.last.LaunchGap.Seconds()
			ttm := "-"
			res.Values[key+"started"] = float64(a.started)
			res.Values[key+"largest_payload_bytes"] = a.payload
			if a.started > 0 {
				res.Values[key+"ttm_s"] = a.ttm.Median
				ttm = a.ttm.fmt("%.1f") + " s"
			}
			t.Rows = append(t.Rows, []string{fmt.Sprint(k.stores), debt, outcome, a.dur.fmt("%.1f") + " s", a.req.fmt("%.0f"),
				fmtOps(a.byOp), a.ev.fmt("%.0f"), fmt.Sprintf("%.0f", a.hb), a.events.fmt("%.0f"),
				fmt.Sprintf("%d / %d (%s, %s)", a.last.Pages, a.last.Batches, fmtDur(a.last.BatchTime), fmtDur(a.last.LaunchGap)), a.alloc.fmt("%.1f"), a.rss.fmt("%.1f"),
				fmt.Sprintf("%d/%d", a.started, a.debt), fmt.Sprintf("%.1f", a.last.startRate()), ttm})
		}
		if len(t.Rows) > 0 {
			res.Tables = append(res.Tables, t)
		}
	}

	lo, hi := sizes[0], sizes[len(sizes)-1]
	for _, d := range sides {
		if a := aggs[fleetKey{d, lo, false}]; a == nil || a.notRun() {
			continue
		}
		var mine []fleetKey
		for _, k := range order {
			if k.side == d {
				mine = append(mine, k)
			}
		}
		line := func(f func(k fleetKey, a *fleetAgg) string) string {
			var parts []string
			for _, k := range mine {
				label := fmt.Sprint(k.stores)
				if k.fixed {
					label += " (same debt)"
				}
				parts = append(parts, label+": "+f(k, aggs[k]))
			}
			return strings.Join(parts, "; ")
		}
		allOK, bounded, payload, events, ttmOK := true, true, true, true, true
		for _, k := range mine {
			a := aggs[k]
			if a.failed != "" {
				allOK = false
				continue
			}
			bounded = bounded && a.req.Median <= float64(2*a.debt+100)
			payload = payload && a.ev.Median <= 256<<10 && a.hb <= 256<<10 && a.payload <= 256<<10
			events = events && a.events.Median <= 10_000 && a.events.Median <= float64(contract.SweepHistoryBound(3, fleetMaxStarts, d.variant.batch()))
			ttmOK = ttmOK && a.ttm.Median <= fleetInterval.Seconds() && a.started == a.debt
		}
		name := d.name()
		res.target(name+": every sweep finishes", "no failed sweep at any size", line(func(_ fleetKey, a *fleetAgg) string {
			if a.failed != "" {
				return a.failed
			}
			return "finished"
		}), allOK)
		if a := aggs[fleetKey{d, hi, false}]; a.failed == "" {
			res.target(name+": sweep within its interval", fmt.Sprintf("≤ %s at %d stores", fleetInterval, hi), fmt.Sprintf("%.1f s", a.dur.Median), a.dur.Median <= fleetInterval.Seconds())
		}
		res.target(name+": requests per sweep", "≤ 2 × stores in debt + 100", line(func(_ fleetKey, a *fleetAgg) string {
			if a.failed != "" {
				return "failed"
			}
			return fmt.Sprintf("%.0f (bound %d)", a.req.Median, 2*a.debt+100)
		}), bounded && allOK)
		a0, a1 := aggs[fleetKey{d, lo, false}], aggs[fleetKey{d, hi, true}]
		if a1 != nil {
			if a0.failed == "" && a1.failed == "" && a0.req.Median > 0 {
				r := a1.req.Median / a0.req.Median
				res.Values[d.valueName()+"_requests_ratio"] = r
				res.target(name+": requests ratio at the same debt", fmt.Sprintf("≤ 1.5 from %d to %d stores, %d in debt", lo, hi, a0.debt), fmt.Sprintf("%.2f", r), r <= 1.5)
				g := (a1.alloc.Median + 1) / (a0.alloc.Median + 1)
				res.Values[d.valueName()+"_alloc_ratio"] = g
				res.target(name+": worker memory for discovery", fmt.Sprintf("flat: (bytes allocated in discovery + 1 MiB) ratio ≤ 1.3 from %d to %d stores at the same debt", lo, hi),
					fmt.Sprintf("%.1f → %.1f MiB (%.2f)", a0.alloc.Median, a1.alloc.Median, g), g <= 1.3)
				r2 := (a1.rss.Median + 1) / (a0.rss.Median + 1)
				res.Values[d.valueName()+"_rss_ratio"] = r2
			} else {
				res.target(name+": requests ratio at the same debt", fmt.Sprintf("≤ 1.5 from %d to %d stores", lo, hi), "a sweep failed", false)
			}
		}
		res.target(name+": largest payload", "≤ 256 KiB (largest history event; heartbeat details)", line(func(_ fleetKey, a *fleetAgg) string {
			if a.payload > 0 {
				return fmt.Sprintf("%.0f KiB, %.0f KiB; SDK warned of a %.0f KiB payload", a.ev.Median/1024, a.hb/1024, a.payload/1024)
			}
			return fmt.Sprintf("%.0f KiB, %.0f KiB", a.ev.Median/1024, a.hb/1024)
		}), payload && allOK)
		res.target(name+": sweep history", fmt.Sprintf("≤ 10,000 events (and ≤ %d, the paged sweep's bound)", contract.SweepHistoryBound(3, fleetMaxStarts, d.variant.batch())), line(func(_ fleetKey, a *fleetAgg) string { return fmt.Sprintf("%.0f", a.events.Median) }), events)
		res.target(name+": time-to-merge", fmt.Sprintf("every indebted store's MergeWal started ≤ %s after its debt was planted or the sweep started", fleetInterval), line(func(_ fleetKey, a *fleetAgg) string {
			if a.started == 0 {
				return fmt.Sprintf("0/%d started", a.debt)
			}
			return fmt.Sprintf("%.1f s, %d/%d started", a.ttm.Median, a.started, a.debt)
		}), ttmOK && allOK)
	}
	res.note("Workers: %d in-process walkeeper instances (own instance ID, store handle, shard queue; shared-queue workflow and activity workers) against one Temporal dev server; mem:// is per process, so worker child processes would need a storage server shared between processes. RSS is the bench process's (workers, the mem:// fleet, the client): the table reports its growth during the sweep (VmHWM after the sweep, reset through /proc/self/clear_refs at its start, minus VmRSS at its start). A worker's memory for discovery is bounded from above by the bytes the whole process allocated from the sweep's start to the end of discovery (runtime/metrics /gc/heap/allocs:bytes, sampled every 50 ms): RSS growth at 1M stores measures the GC's pacing over the fleet's own heap, not a worker.", fleetWorkers)
	res.note("Storage requests: every request of the 8 workers from the sweep's start until its first StartWorkflows started (or its discovery activity closed), and after that the listings of the demand index (the later ScanDemand pages of the paged sweep); the MergeWal runs the sweep starts are not counted, nor requests for an earlier fleet's stores (activities of its terminated MergeWal runs that still reach this fleet's workers; counted apart in the progress log). A listing of the registry or of the demand index counts (and sleeps) one request per 1000 keys, as an object store pages it.")
	res.note("Starts/s: MergeWal runs started over the span from the sweep's first StartWorkflows start to its last one's close (from the sweep's history); the mean batch is a StartWorkflows activity's start-to-close time (a variant's batch, its starts in flight at a time; by default %d starts, %d at a time).", fleetStartBatch, activities.DefaultStartConcurrency)
	res.note("Time-to-merge: from the later of a store's planting and the sweep's start (planting 10,000 stores' debt takes minutes at 1M stores, and the sweep starts when planting ends: the best phase) to its MergeWal's start; with a schedule every interval add up to one interval. The old debt was sealed an hour ago (past MaxPendingAge) at planting, so it has crossed its threshold at the planting time.")
	res.note("The fleet is registered without latency by writing the registry entry and store.json of each store directly (the bytes DB.Create writes for a template store); the debt goes through the seal path of two writers closed afterwards. The scan side reads 128 stores' stats at once (ScanConcurrency; default 8); starts go in the sweep's default batches of 256 (StartBatch), at most 10,000 per sweep (MaxStarts), one batch a second from the first launch (planned pacing), each batch 32 starts at a time, 4 batches in flight (Concurrency), unless a variant (--variants concurrency/batch/pacing) says otherwise.")

	if o.OutDir == "" {
		return
	}
	plotOne := func(file, title, ylabel string, withFixed, withFailed, logY bool, val func(a *fleetAgg) float64) {
		var lines []series
		for i, d := range sides {
			for _, fixed := range []bool{false, true} {
				if fixed && !withFixed {
					continue
				}
				name := d.name() + ", 1% in debt"
				if fixed {
					name = fmt.Sprintf("%s, %d in debt", d.name(), debtOf(lo))
				}
				s := series{Name: name, Color: sideColor(d, i), Dashed: fixed, Points: true, LogY: logY}
				for _, n := range sizes {
					k := fleetKey{d, n, fixed && n != lo}
					a := aggs[k]
					if a == nil || a.notRun() || a.failed != "" && !withFailed {
						continue
					}
					s.X = append(s.X, float64(n))
					s.Y = append(s.Y, max(val(a), 1e-3))
				}
				if len(s.X) > 0 {
					lines = append(lines, s)
				}
			}
		}
		p := filepath.Join(o.OutDir, file)
		if err := savePlot(p, title, "registered stores", ylabel, lines, nil, 520, 340); err == nil {
			res.Files = append(res.Files, p)
		}
	}
	plotOne("fleet-sweep-duration.png", "Sweep duration (failed sweeps: until stopped)", "seconds", true, true, false, func(a *fleetAgg) float64 { return a.dur.Median })
	plotOne("fleet-requests.png", "Storage requests per sweep (failed sweeps: until stopped)", "requests (log)", true, true, true, func(a *fleetAgg) float64 { return a.req.Median })
	plotOne("fleet-rss.png", "Bench process RSS growth during the sweep (8 workers and the fleet)", "MiB", true, true, false, func(a *fleetAgg) float64 { return a.rss.Median })
	plotOne("fleet-discovery-alloc.png", "Bytes allocated during discovery (bounds a worker's discovery memory)", "MiB (log)", true, true, true, func(a *fleetAgg) float64 { return a.alloc.Median })
	plotOne("fleet-time-to-merge.png", "Debt planted to MergeWal start (max; finished sweeps)", "seconds", false, false, false, func(a *fleetAgg) float64 { return a.ttm.Median })
	if csv, err := createCSV(filepath.Join(o.OutDir, "fleet.csv"), "design", "variant", "stores", "debt", "fixed_debt", "failed", "sweep_s", "requests", "largest_event_bytes", "largest_heartbeat_bytes", "history_events", "rss_growth_mib", "started", "ttm_s", "largest_payload_bytes", "discovery_alloc_mib"); err == nil {
		for _, s := range samples {
			csv.row(string(s.Design), s.Variant.String(), s.Stores, s.Debt, s.FixedDebt, strings.ReplaceAll(s.Failed, ",", ";"), s.Duration.Seconds(), s.Requests, s.LargestEvent, s.LargestHeartbeat, s.Events, mib(s.rssGrowth()), s.Started, s.TTM.Seconds(), s.LargestPayload, mib(s.DiscoveryAlloc))
		}
		_ = csv.close()
		res.Files = append(res.Files, filepath.Join(o.OutDir, "fleet.csv"))
	}
}

// sideColor: the scan red and the demand design blue, as in the runs before variants; a
// variant beyond the first of the demand design takes the next colour of sidePalette.
func sideColor(d fleetSide, i int) color.Color {
	if d.variant.isDefault() {
		if d.design == designScan {
			return colBaseline
		}
		return colWalkeeper
	}
	return sidePalette[i%len(sidePalette)]
}

var sidePalette = []color.Color{
	colBaseline, colWalkeeper,
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

func fmtOps(m map[string]int64) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// fleetAgg is one design at one fleet size and debt over its repetitions.
type fleetAgg struct {
	samples                        []fleetSample
	failed                         string
	dur, req, ev, events, rss, ttm spread
	alloc                          spread
	hb, payload                    float64
	started, debt                  int
	byOp                           map[string]int64
	last                           fleetSample // the last repetition, for its pages and start rate
}

func (a *fleetAgg) add(s fleetSample) { a.samples = append(a.samples, s) }

func (a *fleetAgg) notRun() bool { return strings.HasPrefix(a.failed, "not run") }

// finish computes the medians; a failure of any repetition is the cell's outcome.
func (a *fleetAgg) finish() {
	var dur, req, ev, events, rss, ttm, alloc []float64
	for _, s := range a.samples {
		a.debt = s.Debt
		if s.Failed != "" {
			a.failed = s.Failed
		}
		dur = append(dur, s.Duration.Seconds())
		req = append(req, float64(s.Requests))
		ev = append(ev, float64(s.LargestEvent))
		events = append(events, float64(s.Events))
		rss = append(rss, mib(s.rssGrowth()))
		alloc = append(alloc, mib(s.DiscoveryAlloc))
		ttm = append(ttm, s.TTM.Seconds())
		a.hb = max(a.hb, float64(s.LargestHeartbeat))
		a.payload = max(a.payload, float64(s.LargestPayload))
		a.started = s.Started
		a.byOp = s.ByOp
		a.last = s
	}
	a.dur, a.req, a.ev, a.events, a.rss, a.ttm = spreadOf(dur), spreadOf(req), spreadOf(ev), spreadOf(events), spreadOf(rss), spreadOf(ttm)
	a.alloc = spreadOf(alloc)
}

// grpcMaxMessage is gRPC's default message limit, which Temporal's frontend keeps.
const grpcMaxMessage = 4 << 20

// payloadWarnings records the largest PayloadSize of the SDK's "payload over the warning
// limit" log lines (TMPRL1103), which the workers log before sending a result: the only trace
// of a result that gRPC then refuses.
type payloadWarnings struct{ largest atomic.Int64 }

func (p *payloadWarnings) wrap(c zapcore.Core) zapcore.Core { return &payloadCore{Core: c, p: p} }

type payloadCore struct {
	zapcore.Core
	p *payloadWarnings
}

func (c *payloadCore) With(fs []zapcore.Field) zapcore.Core {
	return &payloadCore{Core: c.Core.With(fs), p: c.p}
}

func (c *payloadCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.Contains(e.Message, "TMPRL1103") {
		ce = ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c *payloadCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if !strings.Contains(e.Message, "TMPRL1103") {
		return c.Core.Write(e, fs)
	}
	for _, f := range fs {
		switch f.Type {
		case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type,
			zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type:
		default:
			continue
		}
		if f.Key == "PayloadSize" {
			for {
				cur := c.p.largest.Load()
				if f.Integer <= cur || c.p.largest.CompareAndSwap(cur, f.Integer) {
					break
				}
			}
		}
	}
	return nil
}
