package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// The fairness scenario measures Temporal task-queue fairness for MergeWal (the store kind
// as fairness key, contract.MergePriority): the same server with matching.enableFairness on
// and off side by side, one worker with the default slots. Part one times generic merges
// behind a rollout backlog; part two saturates every kind at its weight and counts each
// kind's completed activities.

// fairnessLight is the number of generic merges measured behind each backlog.
const fairnessLight = 20

// fairnessShareWeights are part two's weights: rollout twice the others.
var fairnessShareWeights = contract.FairnessWeights{store.KindRollout: 2, store.KindGeneric: 1, store.KindDatagen: 1}

// fairnessServer is one server the scenario measures, fairness on or off.
type fairnessServer struct {
	name    string // "dev server", "PostgreSQL cluster"
	cluster bool
	fair    bool
}

func (s fairnessServer) label() string {
	if s.fair {
		return s.name + ", fairness on"
	}
	return s.name + ", fairness off"
}

// fairnessRound is part one's outcome at one backlog in one repetition; waits is where the
// slowest light merge's time went (zero when its history could not be read).
type fairnessRound struct {
	rep, backlog, finished int
	light                  durStats
	drain, slowest         time.Duration
	perSec                 float64
	waits                  mergeWaits
}

func runFairness(ctx context.Context, o Options, res *Result, dir string) error {
	if o.NoSticky {
		// Process-wide, as the SDK has it: this scenario's workers are the process's only ones.
		tworker.SetStickyWorkflowCacheSize(0)
	}
	backlogs, perKind := fullOrQuick(o, []int{0, 400, 2000, 10_000}, []int{0, 50, 200}), fullOrQuick(o, 500, 30)
	if o.Backlogs != nil {
		backlogs = o.Backlogs
	}
	reps := max(o.Reps, 1) // a full run at the default backlogs takes half an hour a server

	res.params("backlogs (rollout merges queued)", backlogs, "repetitions (sides alternate which goes first)", reps,
		"light merges (generic) per backlog", fairnessLight, "saturation merges per kind", perKind,
		"saturation weights", fairnessShareWeights.String())
	def := worker.DefaultConfig()
	res.params("worker", fmt.Sprintf("one, in process, default slots (%d merge, %d shared)", def.MergeSlots, def.SharedActivitySlots),
		"sticky workflow execution", !o.NoSticky)
	var servers []fairnessServer
	if o.fairnessServer("dev") {
		servers = append(servers, fairnessServer{"dev server", false, true}, fairnessServer{"dev server", false, false})
	}
	if o.fairnessServer("cluster") {
		servers = append(servers, fairnessServer{"PostgreSQL cluster", true, true}, fairnessServer{"PostgreSQL cluster", true, false})
	}

	lat := Table{Title: "Generic merge latency (start to close) behind a rollout backlog, and the drain's throughput",
		Header: []string{"server", "rollout backlog", "generic p50", "generic p99", "all merges drained in", "merges/s"}}
	waits := Table{Title: "The slowest generic merge of each round: where its time went, from its history (queue waits are scheduled to started)",
		Header: []string{"server", "rollout backlog", "start to result", "first to last event", "first workflow task queued", "later workflow tasks queued", "activities queued"}}
	share := Table{Title: "Completed Prepare and CommitRound activities per kind while every kind had merges queued, from the first start until a kind completed 60 % of its own (weights " + fairnessShareWeights.String() + ")",
		Header: []string{"server", "rollout", "generic", "datagen", "rollout share (want 50 %)", "generic share (want 25 %)", "datagen share (want 25 %)"}}
	rounds := map[string][]fairnessRound{}
	shares := map[string]map[store.Kind]float64{}
	// The two sides of one server alternate round by round, so drift hits both alike.
	for i := 0; i < len(servers); i += 2 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := func() error {
			var sides []*fairnessSide
			defer func() {
				for _, sd := range sides {
					sd.close(ctx)
				}
			}()
			for _, srv := range servers[i : i+2] {
				side, err := openFairnessSide(ctx, o, srv, filepath.Join(dir, fmt.Sprintf("%t-%t", srv.cluster, srv.fair)))
				if err != nil && srv.cluster {
					o.progressf("fairness: %s: %v; the cluster is left out", srv.label(), err)
					res.note("%s not measured: %v", srv.name, err)
					return nil
				}
				if err != nil {
					return fmt.Errorf("%s: %w", srv.label(), err)
				}
				sides = append(sides, side)
			}
			for rep := range reps {
				for _, b := range backlogs {
					for _, sd := range inTurn(rep, sides...) {
						rd, err := fairnessRoundAt(ctx, o, sd.tenv.client, sd.db, b)
						if err != nil {
							return fmt.Errorf("%s: %w", sd.srv.label(), err)
						}
						rd.rep = rep
						o.progressf("fairness: %s: repetition %d/%d: backlog %d: generic p50 %s p99 %s, drained in %s (%.1f merges/s)", sd.srv.label(),
							rep+1, reps, b, fmtDur(rd.light.P50), fmtDur(rd.light.P99), fmtDur(rd.drain), rd.perSec)
						rounds[sd.srv.label()] = append(rounds[sd.srv.label()], rd)
					}
				}
			}
			for _, sd := range sides {
				sh, err := fairnessShares(ctx, sd.tenv.client, sd.db, sd.counts, perKind)
				if err != nil {
					return fmt.Errorf("%s: %w", sd.srv.label(), err)
				}
				o.progressf("fairness: %s: completed activities while saturated %v", sd.srv.label(), sh)
				shares[sd.srv.label()] = sh
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	for _, srv := range servers {
		r, s := rounds[srv.label()], shares[srv.label()]
		if r == nil {
			continue
		}
		for _, rd := range r {
			backlog := fmt.Sprint(rd.backlog)
			key := fmt.Sprintf("%s_%t_%d", map[bool]string{false: "dev", true: "cluster"}[srv.cluster], srv.fair, rd.backlog)
			if reps > 1 {
				backlog += fmt.Sprintf(" (repetition %d)", rd.rep+1)
				key += fmt.Sprintf("_rep%d", rd.rep+1)
			}
			lat.Rows = append(lat.Rows, []string{srv.label(), backlog, fmtDur(rd.light.P50), fmtDur(rd.light.P99),
				fmtDur(rd.drain), fmt.Sprintf("%.1f", rd.perSec)})
			res.values("%s_"+key, map[string]float64{"light_p50_ms": ms(rd.light.P50), "light_p99_ms": ms(rd.light.P99), "merges_per_s": rd.perSec})
			waits.Rows = append(waits.Rows, []string{srv.label(), backlog, fmtDur(rd.slowest), fmtDur(rd.waits.run),
				fmtDur(rd.waits.firstTask), fmtDur(rd.waits.laterTasks), fmtDur(rd.waits.activities)})
		}
		row := []string{srv.label()}
		var total float64
		for _, k := range store.Kinds {
			total += s[k]
			row = append(row, fmt.Sprint(int(s[k])))
		}
		for _, k := range store.Kinds {
			row = append(row, fmt.Sprintf("%.1f %%", 100*s[k]/max(total, 1)))
		}
		share.Rows = append(share.Rows, row)
	}
	res.Tables = append(res.Tables, lat, waits, share)
	fairnessTargets(res, servers, rounds, shares)
	return nil
}

// fairnessServer tells whether the scenario measures server ("dev" or "cluster").
func (o Options) fairnessServer(server string) bool {
	if o.FairnessServers != nil {
		return slices.Contains(o.FairnessServers, server)
	}
	return server == "dev" || !o.Quick
}

// fairnessTargets judges each server's fair side: generic p99 behind every backlog, each
// kind's share, and the drains' throughput against the same server without fairness.
func fairnessTargets(res *Result, servers []fairnessServer, rounds map[string][]fairnessRound, shares map[string]map[store.Kind]float64) {
	for _, srv := range servers {
		if !srv.fair || rounds[srv.label()] == nil {
			continue
		}
		r := rounds[srv.label()]
		unloaded, limit, worst, met := worstLightP99(r)
		res.target(srv.name+": generic p99 behind every rollout backlog", fmt.Sprintf("≤ 2 × unloaded p99 %s + 1 s = %s", fmtDur(unloaded), fmtDur(limit)),
			fmtDur(worst), met)

		s := shares[srv.label()]
		var total, weights float64
		for _, k := range store.Kinds {
			total += s[k]
			weights += fairnessShareWeights.Weight(k)
		}
		worstDev := 0.0
		for _, k := range store.Kinds {
			want := fairnessShareWeights.Weight(k) / weights
			worstDev = max(worstDev, math.Abs(s[k]/max(total, 1)-want)/want)
		}
		res.Values["share_worst_deviation_"+fmt.Sprint(srv.cluster)] = worstDev
		res.target(srv.name+": each kind's share of completed activities, all kinds saturated", "within ±10 % of its weight's share",
			fmt.Sprintf("worst %.1f %% off", 100*worstDev), worstDev <= 0.10)

		off := rounds[fairnessServer{srv.name, srv.cluster, false}.label()]
		if off == nil {
			continue
		}
		loss := 1 - drainRate(r)/drainRate(off)
		res.Values["throughput_loss_"+fmt.Sprint(srv.cluster)] = loss
		res.target(srv.name+": drain throughput with fairness vs without", "≤ 5 % lower",
			fmt.Sprintf("%.1f %% lower", 100*loss), loss <= 0.05)
	}
}

// worstLightP99 judges each round's light p99 against 2 × its repetition's unloaded (first)
// p99 + 1 s, and returns the round nearest to or furthest over its limit.
// REQUIRES: rounds in the order they ran, each repetition's backlogs together.
func worstLightP99(rounds []fairnessRound) (unloaded, limit, worst time.Duration, met bool) {
	met = true
	var u time.Duration
	for i, rd := range rounds {
		if i == 0 || rd.rep != rounds[i-1].rep {
			u = rd.light.P99
		}
		l := 2*u + time.Second
		if i == 0 || rd.light.P99-l > worst-limit {
			unloaded, limit, worst = u, l, rd.light.P99
		}
		met = met && rd.light.P99 <= l
	}
	return unloaded, limit, worst, met
}

// drainRate is all rounds' merges over their drain times: each round weighs by its work.
func drainRate(rounds []fairnessRound) float64 {
	var merges int
	var took time.Duration
	for _, rd := range rounds {
		merges += rd.finished
		took += rd.drain
	}
	return float64(merges) / max(took.Seconds(), 1e-9)
}

// fairnessSide is one server of the comparison with its worker.
type fairnessSide struct {
	srv    fairnessServer
	tenv   *temporalEnv
	db     *store.DB
	counts *kindActivities
	tws    []tworker.Worker
}

// openFairnessSide starts srv and one worker with the default slots over a store of its own.
func openFairnessSide(ctx context.Context, o Options, srv fairnessServer, dir string) (*fairnessSide, error) {
	o.progressf("fairness: starting %s", srv.label())
	sd := &fairnessSide{srv: srv, counts: &kindActivities{}}
	var err error
	if srv.cluster {
		sd.tenv, err = startCluster(ctx, o, dir, 0, map[string]any{"matching.enableFairness": srv.fair})
	} else {
		sd.tenv, err = startTemporal(ctx, o, dir, devserver.Options{DynamicConfig: []string{fmt.Sprintf("matching.enableFairness=%t", srv.fair)}})
	}
	if err != nil {
		return nil, err
	}
	if sd.db, err = store.OpenDB(ctx, fileURL(filepath.Join(dir, "storage"), true), storeOptions("fairness", o.logger())); err != nil {
		sd.close(ctx)
		return nil, err
	}
	def := worker.DefaultConfig()
	sd.tws = worker.TemporalWorkers{Identity: "bench/fairness", SharedActivitySlots: def.SharedActivitySlots,
		LocalActivitySlots: def.SharedActivitySlots, MergeSlots: def.MergeSlots, StopTimeout: 5 * time.Second,
	}.New(sd.tenv.client, sd.db.Shard(), &activities.Activities{DB: sd.db, Logger: o.logger(), Metrics: sd.counts, Client: sd.tenv.client})
	for _, tw := range sd.tws {
		if err := tw.Start(); err != nil {
			sd.close(ctx)
			return nil, err
		}
	}
	on, err := temporaladmin.ProbeFairness(ctx, sd.tenv.client, "")
	o.progressf("fairness: %s: the start probe says fairness on: %v (error: %v)", srv.label(), on, err)
	return sd, nil
}

func (sd *fairnessSide) close(ctx context.Context) {
	for _, tw := range sd.tws {
		tw.Stop()
	}
	if sd.db != nil {
		_ = sd.db.Close(context.WithoutCancel(ctx))
	}
	if sd.tenv != nil {
		sd.tenv.close()
	}
}

// fairnessRoundAt is part one: backlog rollout merges queued, then fairnessLight generic ones.
func fairnessRoundAt(ctx context.Context, o Options, c client.Client, db *store.DB, backlog int) (fairnessRound, error) {
	rd := fairnessRound{backlog: backlog}
	heavy, light := fairnessTargetsOf(store.KindRollout, backlog), fairnessTargetsOf(store.KindGeneric, fairnessLight)
	if err := sealOne(ctx, db, append(append([]store.Target(nil), heavy...), light...)); err != nil {
		return rd, err
	}
	t0 := time.Now()
	runs, err := startMerges(ctx, c, heavy, contract.FairnessWeights{})
	if err != nil {
		return rd, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	var slowestID string
	var g errgroup.Group
	for _, t := range light {
		g.Go(func() error {
			start := time.Now()
			run, err := contract.StartMergeWal(ctx, c, t, contract.MergeWalInput{Trigger: contract.TriggerCLI, TriggerReason: "bench fairness"})
			if err != nil {
				return err
			}
			if err := run.Get(ctx, nil); err != nil {
				return err
			}
			took := time.Since(start)
			mu.Lock()
			lat = append(lat, took)
			if took > rd.slowest {
				rd.slowest, slowestID = took, run.GetID()
			}
			mu.Unlock()
			return nil
		})
	}
	g.Go(func() error { return awaitRuns(ctx, runs) })
	if err := g.Wait(); err != nil {
		return rd, err
	}
	rd.drain = time.Since(t0)
	rd.light = summarize(lat)
	if rd.waits, err = waitsOf(ctx, c, slowestID); err != nil {
		o.progressf("fairness: the history of %s: %v", slowestID, err)
	}
	rd.finished = backlog + fairnessLight
	rd.perSec = float64(rd.finished) / rd.drain.Seconds()
	return rd, nil
}

// fairnessShares is part two: perKind merges of every kind, started interleaved at
// fairnessShareWeights, and each kind's completed activities until some kind has completed
// fairnessShareWindow of its own (up to then every kind has merges queued).
func fairnessShares(ctx context.Context, c client.Client, db *store.DB, counts *kindActivities, perKind int) (map[store.Kind]float64, error) {
	var all []store.Target
	byKind := map[store.Kind][]store.Target{}
	for _, k := range store.Kinds {
		byKind[k] = fairnessTargetsOf(k, perKind)
	}
	for i := range perKind {
		for _, k := range store.Kinds {
			all = append(all, byKind[k][i])
		}
	}
	if err := sealOne(ctx, db, all); err != nil {
		return nil, err
	}
	t0 := time.Now()
	runs, err := startMerges(ctx, c, all, fairnessShareWeights)
	if err != nil {
		return nil, err
	}
	if err := awaitRuns(ctx, runs); err != nil {
		return nil, err
	}
	return counts.sharesUntil(t0, int(fairnessShareWindow*float64(2*perKind))), nil
}

// fairnessShareWindow is the fraction of its activities at which part two stops counting.
const fairnessShareWindow = 0.6

// fairnessTargetsOf names n stores of kind k (the same names every round).
func fairnessTargetsOf(k store.Kind, n int) []store.Target {
	out := make([]store.Target, n)
	for i := range out {
		out[i] = store.Target{Kind: k, Name: fmt.Sprintf("fair-%06d", i)}
	}
	return out
}

// sealOne creates each target (or opens it) and seals one generation of 5 rows in it.
func sealOne(ctx context.Context, db *store.DB, targets []store.Target) error {
	return eachN(8, len(targets), func(j int) error {
		t := targets[j]
		s, err := db.Open(ctx, t)
		if err != nil {
			if s, err = db.Create(ctx, t, createOptsFor(t.Kind)); err != nil {
				return err
			}
		}
		rows := make([]map[string]any, 5)
		for i := range rows {
			rows[i] = map[string]any{"id": fmt.Sprintf("r%d", i)}
			if t.Kind == store.KindDatagen {
				rows[i] = map[string]any{"item_id": "item", "checkpoint": "c", "ordinal": i}
			}
		}
		body, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		if _, err := s.AppendJSON(ctx, body); err != nil {
			return err
		}
		_, err = s.Flush(ctx)
		return err
	})
}

// startMerges starts one MergeWal per target, 64 starts in flight, at its kind's weight.
func startMerges(ctx context.Context, c client.Client, targets []store.Target, w contract.FairnessWeights) ([]client.WorkflowRun, error) {
	runs := make([]client.WorkflowRun, len(targets))
	err := eachN(64, len(targets), func(i int) error {
		var err error
		runs[i], err = contract.StartMergeWal(ctx, c, targets[i], contract.MergeWalInput{Trigger: contract.TriggerCLI,
			TriggerReason: "bench fairness backlog", FairnessWeight: w.Weight(targets[i].Kind)})
		return err
	})
	return runs, err
}

// backlogWaits bounds the backlog's result waits (long polls) in flight: past
// frontend.namespaceCount the SDK retries with backoff, and the light merges' waits would
// time those retries.
const backlogWaits = 64

// awaitRuns waits until every run has closed, backlogWaits at a time.
func awaitRuns(ctx context.Context, runs []client.WorkflowRun) error {
	return eachN(backlogWaits, len(runs), func(i int) error { return runs[i].Get(ctx, nil) })
}

// kindActivities records each Prepare and CommitRound completed, by kind (activities.Metrics).
type kindActivities struct {
	mu     sync.Mutex
	events []kindEvent // in time order: each is stamped under mu
}

type kindEvent struct {
	at   time.Time
	kind store.Kind
}

// ActivityDone implements activities.Metrics.
func (k *kindActivities) ActivityDone(activity string, kind store.Kind, outcome string, _ time.Duration) {
	if activity != contract.PrepareActivity && activity != contract.CommitRoundActivity {
		return
	}
	k.mu.Lock()
	k.events = append(k.events, kindEvent{time.Now(), kind})
	k.mu.Unlock()
}

// sharesUntil counts each kind's completions after from, until one kind reaches limit.
func (k *kindActivities) sharesUntil(from time.Time, limit int) map[store.Kind]float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[store.Kind]float64{}
	for _, e := range k.events {
		if !e.at.After(from) {
			continue
		}
		if out[e.kind]++; out[e.kind] >= float64(limit) {
			break
		}
	}
	return out
}
